"""Whom a memory is by or about, and the subject boost (part of stage 6, merge).

A question that names someone or something ("What did Caroline research?", "When do I fly to
Italy?") is most often answered by what that person said or by a memory about that thing, and one
word of the question weighs little in BM25 when the name is in half the memories (a speaker of a
conversation is). A memory's subjects are:

- the speaker of a transcript line, the way chat turns are stored ("Caroline: I've been looking
  into adoption agencies", "Dr. Mel Ruiz: ...": up to four capitalised words before a colon);
- the names in its title ("Flights booked to Italy").

A hit whose subjects include a name its sub-query names gets ``score x subject_boost`` (never a
filter; ``original_score`` kept). Names are compared in lower case, a possessive ("Caroline's")
counts as the name, and month and day names are not names of anyone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ferret.records import Hit, Memory
from ferret.text import CALENDAR
from worker.pipeline.classify import entities_of

_SPEAKER = re.compile(r"^\s*((?:[A-Z][\w.'’-]*\s+){0,3}[A-Z][\w.'’-]*)\s*:\s")
_POSSESSIVE = re.compile(r"['’]s?$")


def _names(words: Iterable[str]) -> frozenset[str]:
    found = (_POSSESSIVE.sub("", w).lower() for w in words)
    return frozenset(w for w in found if w and w not in CALENDAR)


def named_in(query: str) -> frozenset[str]:
    """The names a query asks about (its capitalised words and tickers, lower case)."""
    return _names(entities_of(query))


def subjects_of(memory: Memory) -> frozenset[str]:
    """The speaker's names and the title's names, lower case."""
    speaker = _SPEAKER.match(memory.content_body)
    words: list[str] = speaker.group(1).split() if speaker else []
    if memory.content_title:
        words += list(entities_of(memory.content_title, at_sentence_start=True))
    return _names(words)


def apply_subject_boost(hits: Sequence[Hit], named: frozenset[str], boost: float) -> list[Hit]:
    """``score x boost`` for the hits whose subjects include one of ``named``; never a filter."""
    if not named or boost <= 1.0:
        return list(hits)
    return [replace(h, score=h.score * boost, boosted=True) if subjects_of(h.memory) & named else h for h in hits]
