"""Recency, as an option: a newer memory outranks an older one about the same thing.

A hit's score is multiplied by ``0.5 ** (age / half_life)``, where its age is how much older the memory is
(its event time, else its write time) than the newest candidate of the search. Measuring from the newest
candidate rather than the clock changes nothing in the ranking (every score would get the same extra
factor) but keeps scores on their usual scale, so the absolute thresholds (the quality gate's, good_score)
mean what they meant. A memory with no time, or one that does not parse, keeps its score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from ferret.records import Hit, Memory

SECONDS_PER_DAY = 86_400.0


@lru_cache(maxsize=65_536)
def _epoch(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def memory_time(memory: Memory) -> float | None:
    """The memory's time in epoch seconds: its event time, else its write time (ISO 8601)."""
    for text in (memory.temporal_event_time, memory.provenance_created_at):
        if text:
            found = _epoch(text)
            if found is not None:
                return found
    return None


def newest_of(hits: Iterable[Hit]) -> float | None:
    times = [t for t in (memory_time(h.memory) for h in hits) if t is not None]
    return max(times) if times else None


def apply_recency(hits: Sequence[Hit], half_life_days: float, newest: float | None) -> list[Hit]:
    """Scores decayed by age behind ``newest`` (the search's newest candidate); ``original_score`` kept."""
    if newest is None:
        return list(hits)
    half_life = half_life_days * SECONDS_PER_DAY
    decayed = []
    for hit in hits:
        when = memory_time(hit.memory)
        if when is None or when >= newest:
            decayed.append(hit)
        else:
            decayed.append(replace(hit, score=hit.score * 0.5 ** ((newest - when) / half_life)))
    return decayed
