"""Compound questions phrased the many ways people chain them, for development.

The benchmark's own five templates are one narrow way of joining two
questions. These sets join two, three or four questions of one conversation
(disjoint evidence) as people write them: one per line, bullets, numbers,
"Plus,", "Oh, and", "First, ... Second, ...", a dash, a semicolon, a list
with a final "and"; two questions about the same person with the second
naming them by a pronoun; and the joins of French, Spanish and German
("Et aussi", "Y también", "Und außerdem", ...) around the questions (the
memories are English, so the questions stay English: these sets test that
the joins are recognised). Each row keeps its questions, so the perfect
split is the reference.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferret.bench.locomo import CompoundQuery, Question
from ferret.settings import PipelineSettings
from ferret.text import starts_with_question_word


def _bare(text: str) -> str:
    return text.strip().rstrip("?.! ").strip()


def _low(text: str) -> str:
    bare = _bare(text)
    return bare[:1].lower() + bare[1:] if starts_with_question_word(bare) else bare


Join = Callable[[Sequence[str]], str]


@dataclass(frozen=True)
class Phrasing:
    name: str
    parts: int
    join: Join
    language: str = "en"
    same_person: bool = False


def _each_line(prefix: Callable[[int], str]) -> Join:
    return lambda qs: "\n".join(f"{prefix(i)}{_bare(q)}?" for i, q in enumerate(qs))


def _listed(qs: Sequence[str]) -> str:
    return ", ".join(_low(q) if i else _bare(q) for i, q in enumerate(qs[:-1])) + f", and {_low(qs[-1])}?"


PHRASINGS: tuple[Phrasing, ...] = (
    Phrasing("line_break", 2, _each_line(lambda i: "")),
    Phrasing("bullets", 2, _each_line(lambda i: "- ")),
    Phrasing("plus", 2, lambda qs: f"{_bare(qs[0])}? Plus, {_low(qs[1])}?"),
    Phrasing("oh_and", 2, lambda qs: f"{_bare(qs[0])}? Oh, and {_low(qs[1])}?"),
    Phrasing("first_second", 2, lambda qs: f"First, {_low(qs[0])}? Second, {_low(qs[1])}?"),
    Phrasing("two_things", 2, lambda qs: f"Two things: {_low(qs[0])}, and {_low(qs[1])}?"),
    Phrasing("dash", 2, lambda qs: f"{_bare(qs[0])} - and {_low(qs[1])}?"),
    Phrasing("semicolon", 2, lambda qs: f"{_bare(qs[0])}; {_low(qs[1])}?"),
    Phrasing("same_person", 2, lambda qs: f"{_bare(qs[0])} and {_low(qs[1])}?", same_person=True),
    Phrasing("same_person_lines", 2, _each_line(lambda i: ""), same_person=True),
    Phrasing("three_listed", 3, _listed),
    Phrasing("three_numbered", 3, _each_line(lambda i: f"{i + 1}. ")),
    Phrasing("three_question_marks", 3, lambda qs: " ".join(f"{_bare(q)}?" for q in qs)),
    Phrasing("four_bullets", 4, _each_line(lambda i: "* ")),
    Phrasing("four_listed", 4, _listed),
    Phrasing("fr_et_aussi", 2, lambda qs: f"{_bare(qs[0])} ? Et aussi, {_low(qs[1])} ?", "fr"),
    Phrasing("fr_puis", 2, lambda qs: f"{_bare(qs[0])}, puis {_low(qs[1])} ?", "fr"),
    Phrasing("es_y_tambien", 2, lambda qs: f"¿{_bare(qs[0])}? Y también, ¿{_low(qs[1])}?", "es"),
    Phrasing("es_ademas", 2, lambda qs: f"{_bare(qs[0])}, y además {_low(qs[1])}?", "es"),
    Phrasing("de_und_ausserdem", 2, lambda qs: f"{_bare(qs[0])}? Und außerdem: {_low(qs[1])}?", "de"),
    Phrasing("de_und_auch", 2, lambda qs: f"{_bare(qs[0])}, und auch {_low(qs[1])}?", "de"),
)

# A handful of common first names of women, for the same-person sets' pronoun (the decomposer reads
# "she" and "he" alike: the pronoun only makes the question read naturally).
_SHE = frozenset("""mary patricia jennifer linda elizabeth barbara susan jessica sarah karen lisa nancy betty
margaret sandra ashley emily donna michelle carol amanda melissa deborah stephanie rebecca laura sharon
cynthia kathleen amy angela anna emma olivia sophia isabella mia charlotte amelia harper evelyn abigail ella
grace chloe victoria maria julia claire sophie lucia elena marie camille""".split())
_NAME = re.compile(r"\b([A-Z][a-z]+)\b")


def _subject(question: str) -> str | None:
    """The first capitalised word after the question's first word (who it is about, in LoCoMo's questions)."""
    first = question.split()[0] if question.split() else ""
    return next((word for word in _NAME.findall(question) if word != first), None)


def _as_pronoun(question: str, name: str) -> str | None:
    """The question with its subject named by a pronoun (he/she, his/her), or None if it cannot be."""
    possessive, subject = ("her", "she") if name.lower() in _SHE else ("his", "he")
    replaced, count = re.subn(rf"\b{name}['’]s\b", possessive, question)
    replaced, more = re.subn(rf"\b{name}\b", subject, replaced)
    return replaced if count + more == 1 else None


def _groups(pool: list[Question], size: int, rng: random.Random, wanted: int) -> list[list[Question]]:
    found: list[list[Question]] = []
    if len(pool) < size:  # a conversation with fewer questions than the set joins
        return found
    for _ in range(wanted * 50):
        if len(found) >= wanted:
            break
        group = rng.sample(pool, size)
        evidence = [q.evidence for q in group]
        if all(not (a & b) for i, a in enumerate(evidence) for b in evidence[i + 1:]) and group not in found:
            found.append(group)
    return found


def _same_person_pairs(pool: list[Question], rng: random.Random, wanted: int) -> list[tuple[Question, str]]:
    """(first question, second question rewritten with a pronoun) about one person."""
    by_name: dict[str, list[Question]] = {}
    for question in pool:
        name = _subject(question.text)
        if name:
            by_name.setdefault(name, []).append(question)
    made: list[tuple[Question, Question, str]] = []
    for name in sorted(by_name):
        group = by_name[name]
        rng.shuffle(group)
        for a, b in zip(group[::2], group[1::2], strict=False):
            second = _as_pronoun(b.text, name)
            if second and not a.evidence & b.evidence:
                made.append((a, b, second))
    rng.shuffle(made)
    return [(a, f"{b.text}\x00{second}") for a, b, second in made[:wanted]]


def phrasing_sets(questions: list[Question], per_conversation: int = 20, seed: int = 11,
                  phrasings: Sequence[Phrasing] = PHRASINGS) -> dict[str, list[CompoundQuery]]:
    """Every phrasing's set: ``per_conversation`` compound questions from each conversation."""
    rng = random.Random(seed)
    by_conversation: dict[str, list[Question]] = {}
    for question in questions:
        by_conversation.setdefault(question.conversation, []).append(question)
    sets: dict[str, list[CompoundQuery]] = {}
    for phrasing in phrasings:
        made: list[CompoundQuery] = []
        for name in sorted(by_conversation):
            pool = by_conversation[name]
            if phrasing.same_person:
                for first, packed in _same_person_pairs(pool, rng, per_conversation):
                    original, second = packed.split("\x00")
                    partner = next(q for q in pool if q.text == original)
                    made.append(CompoundQuery(name, phrasing.join([first.text, second]),
                                              (first.evidence, partner.evidence), phrasing.name,
                                              (first.text, partner.text)))
                continue
            for group in _groups(pool, phrasing.parts, rng, per_conversation):
                made.append(CompoundQuery(name, phrasing.join([q.text for q in group]),
                                          tuple(q.evidence for q in group), phrasing.name,
                                          tuple(q.text for q in group)))
        sets[phrasing.name] = made
    return sets


def evaluate_sets(backends: dict[str, Any], sets: dict[str, list[CompoundQuery]], base: PipelineSettings,
                  ) -> dict[str, dict[str, Any]]:
    """Per set: Ferret, single-shot (question words stripped) and the perfect split, scored."""
    from benchmarks.retrieval import _oracle_split, _pipeline, _single_shot, score_compounds

    ferret, single = _pipeline(base), _single_shot(True, base)
    report: dict[str, dict[str, Any]] = {}
    for name, queries in sets.items():
        phrasing = next(p for p in PHRASINGS if p.name == name)
        report[name] = {
            "parts": phrasing.parts, "language": phrasing.language, "n": len(queries),
            "example": queries[0].text if queries else "",
            "ferret": score_compounds([ferret(backends[q.conversation], q.text) for q in queries], queries),
            "single_shot_stripped": score_compounds([single(backends[q.conversation], q.text) for q in queries],
                                                    queries),
            "perfect_split": score_compounds([_oracle_split(backends[q.conversation], q, base.search_limit_per_query)
                                              for q in queries], queries),
        }
    return report


def markdown(report: dict[str, dict[str, Any]]) -> str:
    lines = ["compound questions phrased other ways (all@k: every part found in the top k):", "",
             "| set | parts | lang | n | Ferret all@5 | all@10 | all@20 | perfect split all@10 | single-shot all@10 |"
             " Ferret - perfect @10 |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in report.items():
        f, p, s = row["ferret"], row["perfect_split"], row["single_shot_stripped"]
        lines.append(f"| {name} | {row['parts']} | {row['language']} | {row['n']} | {f['both@5']:.3f} | "
                     f"{f['both@10']:.3f} | {f['both@20']:.3f} | {p['both@10']:.3f} | {s['both@10']:.3f} | "
                     f"{f['both@10'] - p['both@10']:+.3f} |")
    below = [name for name, row in report.items() if row["ferret"]["both@10"] < row["perfect_split"]["both@10"]]
    lines += ["", f"sets where Ferret's all@10 is below the perfect split's: {len(below)} of {len(report)}"
                  + (f" ({', '.join(below)})" if below else "")]
    return "\n".join(lines)


def write_sets(sets: dict[str, list[CompoundQuery]], directory: Path) -> None:
    """Each set as a --compound-file (JSONL: conversation, text, parts, template, questions)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, queries in sets.items():
        rows = [json.dumps({"conversation": q.conversation, "text": q.text, "parts": [sorted(p) for p in q.parts],
                            "template": q.template, "questions": list(q.questions or ())}) for q in queries]
        (directory / f"{name}.jsonl").write_text("\n".join(rows) + "\n")
