"""LoCoMo data for the retrieval benchmark.

One namespace per conversation, one memory per dialog turn (speaker and text,
plus the image caption if any; the session date as the memory's time).
Questions of categories 1-4 are evaluated (5 is adversarial: no answer).
Evidence ids are dialog ids; malformed ones, or ones naming no turn, are
skipped and counted. Compound queries are built deterministically from pairs
of questions of one conversation with disjoint evidence.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ferret.records import Memory
from ferret.text import starts_with_question_word

EVALUATED_CATEGORIES = (1, 2, 3, 4)
_DIA_ID = re.compile(r"^D\d+:\d+$")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class CompoundQuery:
    conversation: str
    text: str
    parts: tuple[frozenset[str], ...]  # each part's evidence: two or more parts
    template: str
    questions: tuple[str, ...] | None = None  # the questions it was built from, when known

    @property
    def evidence(self) -> frozenset[str]:
        return frozenset().union(*self.parts)


@dataclass
class Dataset:
    memories: dict[str, list[Memory]]
    questions: list[Question]
    skipped: Counter[str] = field(default_factory=Counter)


def _session_time(raw: str | None) -> str | None:
    if not raw:
        return None
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(raw.strip(), fmt).isoformat() + "Z"
        except ValueError:
            continue
    return None


def _memories(conversation: dict[str, Any]) -> list[Memory]:
    memories = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.match(key)
        if not match or not isinstance(turns, list):
            continue
        when = _session_time(conversation.get(f"session_{match.group(1)}_date_time"))
        for turn in turns:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares an image: {turn['blip_caption']}]"
            memories.append(Memory(id=turn["dia_id"], type="event", content_body=text,
                                   temporal_event_time=when, provenance_created_at=when))
    return memories


def load(path: Path) -> Dataset:
    samples = json.loads(Path(path).read_text())
    dataset = Dataset(memories={}, questions=[])
    for sample in samples:
        name = sample["sample_id"]
        memories = _memories(sample["conversation"])
        dataset.memories[name] = memories
        known = {m.id for m in memories}
        for qa in sample["qa"]:
            if qa.get("category") not in EVALUATED_CATEGORIES:
                dataset.skipped["adversarial_question"] += 1
                continue
            evidence = set()
            for item in qa.get("evidence", []):
                if not _DIA_ID.match(item) or item not in known:
                    dataset.skipped["malformed_evidence_id"] += 1
                    continue
                evidence.add(item)
            if not evidence:
                dataset.skipped["question_without_valid_evidence"] += 1
                continue
            dataset.questions.append(Question(name, qa["question"], frozenset(evidence), qa["category"]))
    return dataset


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if starts_with_question_word(text) else text


def _join(template: str, first: str, second: str) -> str:
    a, b = first.strip().rstrip("?").strip(), second.strip()
    if template == "question_marks":
        return f"{a}? {b}"
    if template == "and_question_word":
        return f"{a}, and {_lower_first(b)}"
    if template == "also":
        return f"{a}? Also, {_lower_first(b)}"
    if template == "as_well_as":
        return f"{a}, as well as {_lower_first(b)}"
    return f"{a} and {_lower_first(b)}"  # plain "and"


TEMPLATES = ("question_marks", "and_question_word", "also", "as_well_as", "and")


def compound_queries(questions: list[Question], per_conversation: int, seed: int = 7) -> list[CompoundQuery]:
    """Pairs of same-conversation questions with disjoint evidence, joined by rotating templates."""
    rng = random.Random(seed)
    by_conversation: dict[str, list[Question]] = {}
    for question in questions:
        by_conversation.setdefault(question.conversation, []).append(question)
    made: list[CompoundQuery] = []
    for name in sorted(by_conversation):
        pool = by_conversation[name]
        pairs = [(a, b) for i, a in enumerate(pool) for b in pool[i + 1:] if not a.evidence & b.evidence]
        rng.shuffle(pairs)
        for index, (a, b) in enumerate(pairs[:per_conversation]):
            template = TEMPLATES[index % len(TEMPLATES)]
            made.append(CompoundQuery(name, _join(template, a.text, b.text), (a.evidence, b.evidence), template,
                                      (a.text, b.text)))
    return made


def read_compound_file(path: Path) -> list[CompoundQuery]:
    """JSONL rows: {conversation, text, parts: [[ids], [ids], ...], template?, questions?: [text, ...]}:
    two or more parts, every one kept; ``questions`` (one per part) gives the perfect-split reference."""
    rows = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        parts = tuple(frozenset(p) for p in row["parts"])
        if len(parts) < 2:
            raise ValueError(f"{path}:{number}: parts: a compound query has two or more parts")
        questions = row.get("questions")
        if questions is not None and len(questions) != len(parts):
            raise ValueError(f"{path}:{number}: questions: one per part ({len(parts)}), not {len(questions)}")
        rows.append(CompoundQuery(row["conversation"], row["text"], parts, row.get("template", "file"),
                                  tuple(questions) if questions else None))
    return rows
