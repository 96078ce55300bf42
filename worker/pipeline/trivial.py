"""Before retrieval (seed 000): a leading timestamp is stripped, and a
message with nothing to search for gets no search.

An agent that prefetches context sends every message, and many are "ok",
"thanks" or a bare timestamp; searching them costs a job's work and injects
noise. ``prepare`` strips a leading timestamp (``[2026-11-23 14:05]``,
``2026-11-23T14:05:22Z``, ``14:05 -``, ``11/23/2026, 2:05 PM``) and says why a
message needs no search: ``empty`` (nothing but a timestamp or punctuation)
or ``trivial`` (one of the settings' words, case and punctuation aside).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ferret.worker.pipeline.typos import mend_question_words

_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s*[AaPp]\.?[Mm]\.?)?"
_ZONE = r"(?:Z|[+-]\d{2}:?\d{2}|\s*UTC)?"
_STAMP = (rf"(?:\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]{_CLOCK}{_ZONE})?"
          rf"|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}(?:,?\s+{_CLOCK})?"
          rf"|{_CLOCK}{_ZONE})")
_LEADING_TIMESTAMP = re.compile(rf"^\s*(?:[\[(<]\s*{_STAMP}\s*[\])>]|{_STAMP}(?=\s|$|[-–—:|>,\]]))\s*[-–—:|>,]*\s*")
_NOT_WORDS = re.compile(r"[\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Prepared:
    query: str  # what is searched: the message without its leading timestamp
    skip: str | None  # why there is nothing to search (empty | trivial), else None
    stripped: str  # the timestamp taken off the front ("" when none)


def _words(text: str) -> str:
    return " ".join(_NOT_WORDS.sub(" ", text.lower()).split())


@lru_cache(maxsize=8)
def _word_set(messages: tuple[str, ...]) -> frozenset[str]:
    """The settings' trivial messages as compared (built once per list, not per job)."""
    return frozenset(_words(t) for t in messages)


def prepare(message: str, trivial_messages: Iterable[str], strip_timestamps: bool = True) -> Prepared:
    query, stripped = message, ""
    if strip_timestamps:
        match = _LEADING_TIMESTAMP.match(message)
        if match:
            stripped, query = match.group(0).strip(), message[match.end():]
    words = _words(query)
    if not words:
        return Prepared(query, "empty", stripped)
    if words in _word_set(tuple(trivial_messages)):
        return Prepared(query, "trivial", stripped)
    return Prepared(mend_question_words(query.strip()), None, stripped)
