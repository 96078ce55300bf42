"""Seed 002's text protocol between the agent loop and the LLM, and its
tolerant parsing.

A step's answer is ``THOUGHT:`` then ``ACTION:`` / ``ARGUMENTS:`` (JSON), or
for two independent tools ``ACTION_1:`` / ``ARGUMENTS_1:``, ``ACTION_2:`` /
``ARGUMENTS_2:`` (at most two; numbered first, then single). Arguments that
are not valid JSON are repaired (json-repair), else read as ``key: value`` /
``key=value`` pairs. A terminal action (``final_answer``,
``ask_clarification``) next to another keeps only the terminal one. A
reflection concludes when it says ``ACTION: final_answer``.

What small real models write (Qwen2.5-Coder-1.5B behind llama.cpp's
server, issue 31) is repaired and counted in ``Decision.repairs``:
- ``invented_steps``: the model kept writing past its action, an
  observation of its own and a second THOUGHT/ACTION (the loop also sends
  stop sequences, ``STOP``, which a server may ignore); everything from the
  invented OBSERVATION or the second THOUGHT on is dropped;
- ``arguments_in_action``: ``ACTION: search_memory("BTC thesis")`` or
  ``search_memory(query="...")``: the parenthesis is the arguments when
  there is no ARGUMENTS field; a bare parameter name there
  (``search_memory(query)``) is a placeholder, not an argument;
- ``several_calls_in_one_action``: ``lookup_memory(ids=[...]);
  lookup_memory(ids=[...])`` on one action line is two actions;
- ``arguments_repaired``: ARGUMENTS that were not JSON (json-repair, a
  JSON object followed by prose, ``key=value`` literals, ``key: value``
  pairs, then the text as the query).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from json_repair import repair_json

TERMINAL = ("final_answer", "ask_clarification")
MAX_PARALLEL = 2
# Where a step's answer ends: an OpenAI-compatible server stops before any of these (at most four). Not
# THOUGHT: an answer that starts with a blank line would end before its first thought (the parser drops a
# second THOUGHT instead).
STOP = ("\nOBSERVATION", "\nObservation", "\nObs:")
# The tools' parameter names: one of them alone in an action's parenthesis is a placeholder.
PARAMETERS = frozenset({"query", "question", "filters", "ids", "entity", "a", "b", "memory_ids", "reason"})

_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_THOUGHT = re.compile(r"THOUGHT\s*:\s*(.*?)(?=\n\s*ACTION(?:_\d)?\s*:|\Z)", re.DOTALL | re.IGNORECASE)
_FIELD_END = r"(?=\n\s*(?:THOUGHT|ACTION(?:_\d)?|ARGUMENTS(?:_\d)?)\s*:|\Z)"
_PAIR = re.compile(r"""["']?(\w+)["']?\s*[:=]\s*(?:"([^"]*)"|'([^']*)'|([^,\n}]+))""")
_CONCLUDE = re.compile(r"ACTION\s*:\s*\**\s*final_answer", re.IGNORECASE)
_FIRST_ACTION = re.compile(r"(?:^|\n)\s*\**ACTION(?:_\d)?\**\s*:", re.IGNORECASE)
_INVENTED = re.compile(r"\n\s*\**(?:OBSERVATION|THOUGHT)\**\s*:", re.IGNORECASE)
_CALL_START = re.compile(r"([A-Za-z_]+)\s*\(")


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
    repairs: tuple[str, ...] = ()  # what had to be repaired to read it (see the module's docstring)


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"(?:^|\n)\s*\**{name}\**\s*:\s*(.*?){_FIELD_END}", text, re.DOTALL | re.IGNORECASE)
    return match.group(1).strip() if match else None


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


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
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]  # an object, then prose: {"ids": [...]}\nfinal_answer
        if isinstance(value, dict):
            return value
        if isinstance(value, str) and value:
            return {"query": value}
    literal = _literal_call(text)  # ids=["D8:2", "D18:3"]
    if literal is not None:
        return literal
    pairs = {m.group(1): next(g for g in m.groups()[1:] if g is not None).strip() for m in _PAIR.finditer(text)}
    return pairs or ({"query": text} if text and "{" not in text else {})


def _action_name(raw: str | None) -> str | None:
    if not raw:
        return None
    match = re.match(r"[`*\s]*([A-Za-z_]+)", raw)
    return match.group(1).lower() if match else None


def _literal_call(inside: str) -> dict[str, Any] | None:
    """``query="x", filters={...}`` or ``"x"`` read as a Python call's literals (``ast.literal_eval``
    evaluates nothing); None when it is not that."""
    try:
        call = ast.parse(f"f({inside})", mode="eval").body
        assert isinstance(call, ast.Call)
        arguments = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
        positional = [ast.literal_eval(a) for a in call.args]
    except (SyntaxError, ValueError, TypeError, AssertionError, MemoryError, RecursionError):
        return None
    if len(positional) == 1 and isinstance(positional[0], dict) and not arguments:
        return positional[0]
    if len(positional) == 1 and isinstance(positional[0], str):
        arguments.setdefault("query", positional[0])
    elif positional:
        return None
    return arguments or None


def _calls(line: str) -> list[tuple[str, str]]:
    """Each ``name(...)`` of an action line, with what is inside its parenthesis (nested brackets and quoted
    text respected): ``a(x=[1, 2]); b("y)")`` is two calls."""
    found: list[tuple[str, str, int]] = []  # (name, inside, where it ends)
    for match in _CALL_START.finditer(line):
        if found and match.start() < found[-1][2]:
            continue
        depth, quote, position = 0, "", match.end() - 1
        for position in range(match.end() - 1, len(line)):
            char = line[position]
            if quote:
                quote = "" if char == quote and line[position - 1] != "\\" else quote
            elif char in "\"'":
                quote = char
            elif char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
                if depth == 0:
                    break
        if depth != 0:
            break
        found.append((match.group(1).lower(), line[match.end():position], position + 1))
    return [(name, inside) for name, inside, _ in found]


def _call_arguments(inside: str) -> str | None:
    """A call's parenthesis as arguments (JSON text); None when it is empty or only names parameters
    (``search_memory(query)``, ``compare_entities(a, b)``)."""
    inside = inside.strip()
    if not inside or all(part.strip().lower() in PARAMETERS for part in inside.split(",")):
        return None
    literal = _literal_call(inside)
    return json.dumps(literal) if literal is not None else inside


def _actions(text: str, suffix: str, repairs: list[str]) -> list[ToolCall]:
    raw = _field(text, f"ACTION{suffix}")
    name = _action_name(raw)
    if not raw or not name:
        return []
    given = _field(text, f"ARGUMENTS{suffix}")
    calls = _calls(raw.splitlines()[0])
    if len(calls) > 1 and not given:  # "lookup_memory(ids=[...]); lookup_memory(ids=[...])"
        repairs.append("several_calls_in_one_action")
        return [ToolCall(called, parse_arguments(_call_arguments(inside))) for called, inside in calls]
    if not given and calls:
        in_call = _call_arguments(calls[0][1])
        if in_call is not None:
            repairs.append("arguments_in_action")
            given = in_call
    elif given and not _is_json_object(given.strip().removeprefix("```json").removeprefix("```").removesuffix("```")):
        repairs.append("arguments_repaired")
    return [ToolCall(name, parse_arguments(given))]


def _cut_invented(text: str, repairs: list[str]) -> str:
    """Drop what follows the first action's block: an observation or a next THOUGHT the model wrote itself."""
    first = _FIRST_ACTION.search(text)
    if first is None:
        return text
    invented = _INVENTED.search(text, first.end())
    if invented is None:
        return text
    repairs.append("invented_steps")
    return text[: invented.start()]


def parse_decision(answer: str) -> Decision:
    repairs: list[str] = []
    text = _cut_invented(_THINK_BLOCK.sub("", answer).strip(), repairs)
    thought_match = _THOUGHT.search(text)
    thought = thought_match.group(1).strip() if thought_match else ""
    actions: list[ToolCall] = []
    for number in range(1, MAX_PARALLEL + 1):
        actions += _actions(text, f"_{number}", repairs)
    if not actions:
        actions = _actions(text, "", repairs)
    actions = actions[:MAX_PARALLEL]
    terminal = [a for a in actions if a.name in TERMINAL]
    if terminal and len(actions) > 1:
        actions = terminal[:1]  # a terminal action ends the run: it is never run beside another
    return Decision(thought, tuple(actions), tuple(dict.fromkeys(repairs)))


def concludes(reflection: str) -> bool:
    """A binding reflection: it says the loop has enough (``ACTION: final_answer``)."""
    return bool(_CONCLUDE.search(_THINK_BLOCK.sub("", reflection)))
