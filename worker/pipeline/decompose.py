"""Stage 3, decompose: split a compound query into sub-queries.

Only compound (D4) queries of at most 500 characters are split. Strategies,
first that yields two or more parts wins:

1. several question marks            "What's BTC at? Did SOL close?"
   or one question per line          "What is my BTC thesis\nHow did SOL go"
2. conjunction + question word       "X and how did Y go?"   (part keeps "how")
3. "also"                            "Check BTC, also look at ETH"
4. "as well as"                      union
5. sequential "then" / "after that"  sequential merge
6. clauses that stand alone          "X. Another thing: Y?", "X / Y?", "X (and Y)?"
                                     (``ferret.worker.pipeline.clauses``: any join)
7. multi-entity                      "BTC and SOL analysis" -> per entity (codes, or
                                     names outside a question: ``classify.joins_entities``)

Parts must be longer than 3 characters; at most ``max_parts`` are kept. A
part that refers back ("... and where did I set its stop?") keeps the
subject the question named once: its reference is resolved from the parts
before it, as a conversation's would be (``ferret.worker.pipeline.rewrite``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ferret.contract import Turn
from ferret.text import CALENDAR, REQUEST_PHRASES
from ferret.worker.pipeline.classify import (
    ALL_QUESTION_WORDS,
    QUESTION_WORD,
    TOO_WORDS,
    YES_NO_OPENING,
    Classification,
    entities_of,
    joins_entities,
)
from ferret.worker.pipeline.clauses import standalone_questions
from ferret.worker.pipeline.rewrite import rewrite

MAX_DECOMPOSABLE_CHARS = 500
MIN_PART_CHARS = 4

MergeStrategy = Literal["none", "union", "sequential"]


@dataclass(frozen=True, slots=True)
class Decomposition:
    parts: tuple[str, ...]
    strategy: str
    merge: MergeStrategy

    @property
    def was_decomposed(self) -> bool:
        return len(self.parts) > 1


# What opens a question, in any of the four languages: a question word (after a preposition too: "in what
# activity", "for how long"), or an auxiliary opening a yes/no question.
_PREPOSITION = (r"(?:in|on|at|for|to|from|with|by|of|about|since|until|after|before|during|around|within|between|"
                r"among|besides|into|under|over|through)")
_OPENS = rf"(?:{_PREPOSITION}\s+)?(?:{ALL_QUESTION_WORDS})\b"
_AND = r"(?:and|but|or|&|et|puis|ensuite|mais|ou|y|e|pero|o|und|aber|oder)"
_CONJUNCTION = re.compile(
    rf"(?:,\s*|\s+-{{1,2}}\s+|\s+—\s+|\s+){_AND}(?:\s+{TOO_WORDS})?[\s,:]+(?=¿?{_OPENS})"
    rf"|[,;]\s+(?=¿?{_OPENS})"
    rf"|(?:;\s*|,\s*(?:{_AND}(?:\s+{TOO_WORDS})?\s+)?)(?={YES_NO_OPENING})",
    re.IGNORECASE,
)
_ALSO = re.compile(rf"(?:,\s*|\s+)(?:{_AND}\s+)?(?:also|aussi|también|además|außerdem|und auch)\b\s*[,:]?",
                   re.IGNORECASE)
_AS_WELL_AS = re.compile(r"\s*,?\s+as well as\s+", re.IGNORECASE)
_SEQUENTIAL = re.compile(r"(?:,\s*|\s+)(?:and\s+)?(?:then|after that|afterwards)\b\s*,?", re.IGNORECASE)
# What a question or a request opens with; a clause that opens otherwise before a comma frames the
# question after it ("According to Gina, what makes ...", "Based on Tim's collections, what ...").
_ASKS = re.compile(rf"^\s*¿?(?:{_OPENS}|(?:{REQUEST_PHRASES}|is|are|was|were|did|does|do|can|could|would|will|"
                   rf"has|have|est-ce|peux|puedes|kannst|können)\b|.*\?\s*$)", re.IGNORECASE)


_TRIM = " \t\n,;:.!?¿-—"
# What a part may open with that is not the question: joiners ("and", "Oh, and", "Plus,", "Y también,")
# and the words that number questions ("First,", "Secondly:", "Enfin,", "Zweitens,").
_LEADING_JOINER = re.compile(
    rf"^(?:(?:and|but|or|&|et|puis|ensuite|mais|ou|y|pero|und|aber|oder|{TOO_WORDS}|then|plus|oh|so|dann)\b[\s,:]*"
    r"|(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|fourth(?:ly)?|finally|lastly|next|premi[eè]rement|"
    r"deuxi[eè]mement|enfin|primero|segundo|finalmente|erstens|zweitens|drittens|schlie(?:ß|ss)lich)\s*[,:]\s*)+",
    re.IGNORECASE)
# A lead-in before a colon that asks nothing ("Two things: ...", "Quick questions: ...").
_PREAMBLE = re.compile(r"^[^:?\n]{1,40}:\s+(?=\S)")


def _clean(parts: list[str]) -> list[str]:
    cleaned = []
    for part in parts:
        part = _LEADING_JOINER.sub("", part.strip(_TRIM)).strip(_TRIM)
        lead = _PREAMBLE.match(part)
        if lead and not _ASKS.match(part) and _ASKS.match(part[lead.end():]):
            part = part[lead.end():]
        cleaned.append(part)
    return [p for p in cleaned if len(p) >= MIN_PART_CHARS]


def _split(pattern: re.Pattern[str], query: str) -> list[str]:
    return _clean(pattern.split(query))


def _by_conjunction(query: str) -> list[str]:
    parts = _split(_CONJUNCTION, query)
    if len(parts) > 1 and not _ASKS.match(parts[0]):  # a frame at the start belongs to the question after it
        parts = [f"{parts[0]}, {parts[1]}", *parts[2:]]
    return parts


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_QUESTION_LINE = re.compile(rf"^\s*(?:{QUESTION_WORD})\b", re.IGNORECASE)


def _by_question_marks(query: str) -> list[str]:
    lines = [_BULLET.sub("", line) for line in query.splitlines() if line.strip()]
    if len(lines) > 1 and sum(1 for line in lines if _QUESTION_LINE.match(line) or line.rstrip().endswith("?")) > 1:
        return _clean([part for line in lines for part in (line.split("?") if line.count("?") > 1 else [line])])
    if query.count("?") < 2:
        return []
    return _clean(query.split("?"))


def _by_entity(query: str, classification: Classification) -> list[str]:
    if not joins_entities(query, classification.entities):  # "BTC and SOL", not "John ... Lord of the Rings"
        return []
    attribute = classification.attribute or ""
    return _clean([f"{entity} {attribute}".strip() for entity in classification.entities])


def decompose(query: str, classification: Classification, max_parts: int) -> Decomposition:
    """Split ``query`` if it is compound; one part means no decomposition."""
    single = Decomposition(parts=(query,), strategy="none", merge="none")
    if not classification.is_compound or len(query) > MAX_DECOMPOSABLE_CHARS or max_parts < 2:
        return single
    attempts: tuple[tuple[str, MergeStrategy, list[str]], ...] = (
        ("question_marks", "union", _by_question_marks(query)),
        ("conjunction", "union", _by_conjunction(query)),
        ("also", "union", _split(_ALSO, query)),
        ("as_well_as", "union", _split(_AS_WELL_AS, query)),
        ("sequential", "sequential", _split(_SEQUENTIAL, query)),
        ("clauses", "union", _clean(standalone_questions(query))),
        ("entity", "union", _by_entity(query, classification)),
    )
    for strategy, merge, parts in attempts:
        unique = list(dict.fromkeys(parts))
        if len(unique) > 1:
            return Decomposition(parts=tuple(_shared_subject(unique[:max_parts])), strategy=strategy, merge=merge)
    return single


def _shared_subject(parts: list[str]) -> list[str]:
    """Each part after the first that names no one of its own with its references resolved from the
    parts before it ("and where did I set its stop?"); a part that names its subject is left as it is."""
    resolved = parts[:1]
    for part in parts[1:]:
        own = [e for e in entities_of(part) if e.lower() not in CALENDAR]
        resolved.append(part if own else rewrite(part, [Turn(content=p) for p in resolved]).query)
    return resolved
