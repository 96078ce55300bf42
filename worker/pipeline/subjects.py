"""Whom a memory is by or about, and the subject boost (part of stage 6, merge).

A question that names someone or something ("What did Caroline research?", "When do I fly to
Italy?") is most often answered by what that person said or by a memory about that thing, and one
word of the question weighs little in BM25 when the name is in half the memories (a speaker of a
conversation is). A memory's subjects are:

- the speaker of a transcript line, the way chat turns are stored ("Caroline: I've been looking
  into adoption agencies", "Dr. Mel Ruiz: ...": up to four capitalised words before a colon);
- its title ("Flights booked to Italy" is about Italy).

A hit whose subjects include a name its sub-query names gets ``score x subject_boost`` (never a
filter; ``original_score`` kept). Names are compared in lower case, a possessive ("Caroline's")
counts as the name, and month and day names are not names of anyone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ferret.records import Hit, Memory
from ferret.text import CALENDAR
from ferret.worker.pipeline.classify import entities_of

_SPEAKER = re.compile(r"^\s*((?:[A-Z][\w.'’-]*\s+){0,3}[A-Z][\w.'’-]*)\s*:\s")
_POSSESSIVE = re.compile(r"['’]s?$")


def named_in(query: str) -> frozenset[str]:
    """The names a query asks about (its capitalised words and tickers, lower case)."""
    found = (_POSSESSIVE.sub("", e).lower() for e in entities_of(query))
    return frozenset(name for name in found if name and name not in CALENDAR)


def _about(names: frozenset[str]) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")\b", re.IGNORECASE)


def is_by_or_about(memory: Memory, about: re.Pattern[str]) -> bool:
    """The memory's speaker or its title names one of the names ``about`` matches."""
    speaker = _SPEAKER.match(memory.content_body)
    return bool((speaker and about.search(speaker.group(1))) or (memory.content_title and
                                                                  about.search(memory.content_title)))


def apply_subject_boost(hits: Sequence[Hit], named: frozenset[str], boost: float) -> list[Hit]:
    """``score x boost`` for the hits by or about one of ``named``; never a filter."""
    if not named or boost <= 1.0:
        return list(hits)
    about = _about(named)
    return [replace(h, score=h.score * boost, boosted=True) if is_by_or_about(h.memory, about) else h for h in hits]
