"""Optional re-rank stage (seed 004): the prompt, the answer's parsing, the blend.

No I/O here. The pipeline hands the top candidates to a ``Scorer`` (the LLM
client lives in ``worker/llm``), which returns a 0-10 relevance per
candidate; this module turns that into a new order:

    blended = (1 - weight) * score + weight * relevance / 10

Candidates past ``top_k`` keep their order after the re-ranked ones. A
candidate the model did not score keeps its own score in the blend.

Answers are parsed tolerantly: ``<think>`` blocks are stripped (an unclosed
one means the model never answered), code fences and prose around the JSON
are ignored, broken JSON is repaired (json-repair). Accepted shapes:
``{"scores": [...]}`` or a bare list, whose items are numbers (by position)
or objects with an id and a score; or an object mapping ids to scores.
Fewer than half of the candidates scored counts as malformed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import json_repair

from ferret.errors import RerankFailed
from ferret.records import Hit
from ferret.settings import RerankSettings

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>", re.IGNORECASE)
_ID_KEYS = ("id", "index", "snippet", "candidate", "n")
_SCORE_KEYS = ("score", "relevance", "rating", "value")

SYSTEM_PROMPT = (
    "You rate how relevant memory snippets are to a query. "
    "Reply with JSON only, no explanation."
)


class Scorer(Protocol):
    """Scores candidates 0-10 for a query, by candidate position (0-based).

    Raises ``RerankFailed`` (reason ``timeout``, ``error`` or ``malformed``).
    """

    def score(self, query: str, candidates: Sequence[Hit], timeout: float) -> dict[int, float]: ...


@dataclass(frozen=True)
class Reranking:
    """What the pipeline needs to re-rank: the settings and, when switched on, the scorer."""

    settings: RerankSettings
    scorer: Scorer | None = None


def _snippet(hit: Hit, max_chars: int) -> str:
    memory = hit.memory
    date = (memory.temporal_event_time or memory.provenance_created_at or "")[:10]
    title = " ".join(memory.content_title.split())
    text = memory.preview
    if len(text) > max_chars:
        text = text[: max_chars - 1].rsplit(" ", 1)[0] + "…"
    head = f"{title} ({date})" if date else title
    return f"{head}: {text}" if head else text


def build_messages(query: str, candidates: Sequence[Hit], preview_chars: int) -> list[dict[str, str]]:
    """Chat messages asking for one 0-10 score per numbered snippet (numbered from 1)."""
    lines = [f"[{n}] {_snippet(hit, preview_chars)}" for n, hit in enumerate(candidates, start=1)]
    user = (
        f"Query: {query}\n\nSnippets:\n" + "\n".join(lines) + "\n\n"
        f"Rate each snippet's relevance to the query from 0 (unrelated) to 10 (answers it). "
        f'Answer as JSON: {{"scores": [{{"id": 1, "score": 7}}, ...]}} with one entry for each of the '
        f"{len(candidates)} snippets."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def strip_thinking(text: str) -> str:
    """Drop ``<think>...</think>`` blocks; an unclosed block leaves nothing after it."""
    text = _THINK_BLOCK.sub("", text)
    opened = _OPEN_THINK.search(text)
    return text[: opened.start()] if opened else text


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return min(10.0, max(0.0, float(value)))
    return None


def _first(item: dict[str, Any], keys: tuple[str, ...]) -> Any:
    lowered = {str(k).lower(): v for k, v in item.items()}
    return next((lowered[k] for k in keys if k in lowered), None)


def _from_list(items: list[Any], count: int) -> dict[int, float]:
    scores: dict[int, float] = {}
    if len(items) > count and not all(isinstance(i, dict) for i in items):
        raise RerankFailed("malformed", f"{len(items)} scores for {count} snippets")
    for position, item in enumerate(items):
        if isinstance(item, dict):
            ident, value = _number(_first(item, _ID_KEYS)), _number(_first(item, _SCORE_KEYS))
            if ident is None or value is None or ident != int(ident):
                continue
            position = int(ident) - 1
        else:
            value = _number(item)
        if value is not None and 0 <= position < count:
            scores.setdefault(position, value)
    return scores


def _from_mapping(mapping: dict[str, Any], count: int) -> dict[int, float]:
    scores: dict[int, float] = {}
    for key, raw in mapping.items():
        ident, value = _number(re.sub(r"\D", "", str(key)) or None), _number(raw)
        if ident is not None and value is not None and 1 <= ident <= count:
            scores[int(ident) - 1] = value
    return scores


def parse_scores(answer: str, count: int) -> dict[int, float]:
    """Scores by candidate position from a model's answer; raise RerankFailed("malformed")."""
    text = strip_thinking(answer).strip()
    if not text:
        raise RerankFailed("malformed", "no answer outside <think>")
    data = json_repair.loads(text)
    if isinstance(data, list) and data and all(isinstance(d, dict) for d in data) and any(
            "scores" in d for d in data):
        data = next(d for d in data if "scores" in d)  # prose with several JSON objects
    if isinstance(data, dict) and "scores" in data:
        data = data["scores"]
    if isinstance(data, list):
        scores = _from_list(data, count)
    elif isinstance(data, dict):
        scores = _from_mapping(data, count)
    else:
        raise RerankFailed("malformed", f"no JSON scores in the answer ({text[:80]!r})")
    if len(scores) * 2 < count:
        raise RerankFailed("malformed", f"only {len(scores)} of {count} snippets scored")
    return scores


def blend(hits: Sequence[Hit], scores: dict[int, float], weight: float, top_k: int) -> tuple[Hit, ...]:
    """The first ``top_k`` hits re-ordered by the blend; the rest after them, unchanged."""
    head, tail = list(hits[:top_k]), list(hits[top_k:])
    rescored = []
    for position, hit in enumerate(head):
        relevance = scores.get(position)
        if relevance is None:
            rescored.append((hit.score, position, hit))
            continue
        value = (1 - weight) * hit.score + weight * relevance / 10
        rescored.append((value, position, replace(hit, score=value, rerank_score=relevance)))
    rescored.sort(key=lambda entry: (-entry[0], entry[1]))
    return tuple(hit for _value, _position, hit in rescored) + tuple(tail)
