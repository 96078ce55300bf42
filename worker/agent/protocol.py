"""Seed 002's text protocol between the agent loop and the LLM, and its
tolerant parsing.

A step's answer is ``THOUGHT:`` then ``ACTION:`` / ``ARGUMENTS:`` (JSON), or
for two independent tools ``ACTION_1:`` / ``ARGUMENTS_1:``, ``ACTION_2:`` /
``ARGUMENTS_2:`` (at most two; numbered first, then single). Arguments that
are not valid JSON are repaired (json-repair), else read as ``key: value`` /
``key=value`` pairs. A terminal action (``final_answer``,
``ask_clarification``) next to another keeps only the terminal one. A
reflection concludes when it says ``ACTION: final_answer``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from json_repair import repair_json

TERMINAL = ("final_answer", "ask_clarification")
MAX_PARALLEL = 2

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_THOUGHT = re.compile(r"THOUGHT\s*:\s*(.*?)(?=\n\s*ACTION(?:_\d)?\s*:|\Z)", re.DOTALL | re.IGNORECASE)
_FIELD_END = r"(?=\n\s*(?:THOUGHT|ACTION(?:_\d)?|ARGUMENTS(?:_\d)?)\s*:|\Z)"
_PAIR = re.compile(r"""["']?(\w+)["']?\s*[:=]\s*(?:"([^"]*)"|'([^']*)'|([^,\n}]+))""")
_CONCLUDE = re.compile(r"ACTION\s*:\s*\**\s*final_answer", re.IGNORECASE)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:80]}" for k, v in self.arguments.items())
        return f"{self.name}({shown})"


@dataclass(frozen=True)
class Decision:
    thought: str
    actions: tuple[ToolCall, ...]  # empty: the answer held no action


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"(?:^|\n)\s*\**{name}\**\s*:\s*(.*?){_FIELD_END}", text, re.DOTALL | re.IGNORECASE)
    return match.group(1).strip() if match else None


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """JSON arguments, repaired if need be, else key/value pairs; {} when nothing is there."""
    if not raw:
        return {}
    text = raw.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    for attempt in (text, repair_json(text) if text else ""):
        try:
            value = json.loads(attempt) if attempt else None
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        if isinstance(value, str) and value:
            return {"query": value}
    pairs = {m.group(1): next(g for g in m.groups()[1:] if g is not None).strip() for m in _PAIR.finditer(text)}
    return pairs or ({"query": text} if text and "{" not in text else {})


def _action_name(raw: str | None) -> str | None:
    if not raw:
        return None
    match = re.match(r"[`*\s]*([A-Za-z_]+)", raw)
    return match.group(1).lower() if match else None


def parse_decision(answer: str) -> Decision:
    text = _THINK_BLOCK.sub("", answer).strip()
    thought_match = _THOUGHT.search(text)
    thought = thought_match.group(1).strip() if thought_match else ""
    actions: list[ToolCall] = []
    for number in range(1, MAX_PARALLEL + 1):
        name = _action_name(_field(text, f"ACTION_{number}"))
        if name:
            actions.append(ToolCall(name, parse_arguments(_field(text, f"ARGUMENTS_{number}"))))
    if not actions:
        name = _action_name(_field(text, "ACTION"))
        if name:
            actions.append(ToolCall(name, parse_arguments(_field(text, "ARGUMENTS"))))
    terminal = [a for a in actions if a.name in TERMINAL]
    if terminal and len(actions) > 1:
        actions = terminal[:1]  # a terminal action ends the run: it is never run beside another
    return Decision(thought, tuple(actions))


def concludes(reflection: str) -> bool:
    """A binding reflection: it says the loop has enough (``ACTION: final_answer``)."""
    return bool(_CONCLUDE.search(_THINK_BLOCK.sub("", reflection)))
