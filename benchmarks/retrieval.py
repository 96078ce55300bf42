"""Retrieval quality on LoCoMo: single-shot search against Ferret's pipeline,
and each stage switched off in turn, on the same backend in one run.

Metrics at k = 5, 10, 20 over the ranked list each system returns:
single questions: evidence recall@k and all-evidence@k (also by category);
compound queries: both-parts-covered@k and recall@k. Also the mean number
of results returned, mean context tokens and median time per query.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from ferret.bench.locomo import CompoundQuery, Dataset, Question
from ferret.records import NO_FILTERS, Hit
from ferret.settings import SEED_FUSION_WEIGHTS, PipelineSettings
from ferret.text import strip_question_words
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.co_retrieval.affinity import InMemoryAffinity
from ferret.worker.pipeline.classify import classify
from ferret.worker.pipeline.decompose import decompose
from ferret.worker.pipeline.formatting import estimate_tokens, format_context
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.sections import sections_for
from ferret.worker.pipeline.typos import mend_question_words
from ferret.worker.semantic.embedders import Embedder

KS = (5, 10, 20)


@dataclass(frozen=True)
class Answer:
    ids: tuple[str, ...]
    context_tokens: int
    seconds: float


System = Callable[[InMemoryBackend, str], Answer]


def _single_shot(strip: bool, settings: PipelineSettings) -> System:
    def run(backend: InMemoryBackend, query: str) -> Answer:
        start = time.perf_counter()
        text = strip_question_words(query) if strip else query
        hits: Sequence[Hit] = backend.search(text or query, settings.search_limit_per_query, NO_FILTERS)
        hits = hits[: settings.max_results]
        seconds = time.perf_counter() - start
        return Answer(tuple(h.id for h in hits), estimate_tokens(format_context(hits, settings.max_context_tokens,
                                                                            sections_for(settings.sections))),
                      seconds)
    return run


def _pipeline(settings: PipelineSettings) -> System:
    def run(backend: InMemoryBackend, query: str) -> Answer:
        start = time.perf_counter()
        result = run_pipeline(query, backend, settings)
        seconds = time.perf_counter() - start
        return Answer(tuple(h.id for h in result.hits), result.stats.answer.context_tokens, seconds)
    return run


def fusion_variants(base: PipelineSettings, semantic: bool) -> dict[str, PipelineSettings]:
    """Ferret with one retriever alone (no shift: it keeps its weight), and fused by the seed's table
    (with the semantic retriever taking half the text weight when embeddings are on); both search the
    parts of a compound question with every retriever (the shipped settings do not: docs/concepts/fusion.md)."""
    fusion = base.fusion

    def alone(text: float, graph: float, share: float) -> PipelineSettings:
        weights = dict.fromkeys(SEED_FUSION_WEIGHTS, (text, graph))
        return base.model_copy(update={"widen_empty_parts": False, "fusion": fusion.model_copy(update={
            "weights": weights, "semantic_share": share, "max_shift": 0.0, "seed_overrides": False,
            "semantic_on_parts": True})})
    rows = {"lexical_alone": alone(1.0, 0.0, 0.0), "graph_alone": alone(0.0, 1.0, 0.0)}
    if semantic:
        rows["semantic_alone"] = alone(1.0, 0.0, 1.0)
    rows["fusion_seed_table"] = base.model_copy(update={"fusion": fusion.model_copy(update={
        "weights": SEED_FUSION_WEIGHTS, "seed_overrides": True, "semantic_share": 0.5 if semantic else 0.0,
        "semantic_on_parts": True})})
    return rows


def systems(base: PipelineSettings, semantic: bool = False) -> dict[str, System]:
    def variant(**changes: Any) -> PipelineSettings:
        return base.model_copy(update=changes)
    return {
        "single_shot": _single_shot(False, base),
        "single_shot_stripped": _single_shot(True, base),
        "ferret": _pipeline(base),
        **{name: _pipeline(settings) for name, settings in fusion_variants(base, semantic).items()},
        "no_decomposition": _pipeline(variant(max_sub_queries=1)),
        "no_retry": _pipeline(variant(max_retries=0)),
        "no_replacement": _pipeline(variant(max_replacements=0)),
        "no_intent_boost": _pipeline(variant(intent_boost=1.0)),
        "no_widening": _pipeline(variant(widen_empty_parts=False)),
        # the options, off by default: recency (a 30-day half-life) and diversity (MMR, 0.7 on relevance)
        "with_recency": _pipeline(variant(recency_half_life_days=30.0)),
        "with_diversity": _pipeline(variant(diversity=0.7)),
    }


def _recall(ids: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(ids[:k])) / len(evidence)


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def score_singles(answers: Sequence[Answer], questions: Sequence[Question]) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(questions)}
    for k in KS:
        out[f"recall@{k}"] = _mean([_recall(a.ids, q.evidence, k) for a, q in zip(answers, questions, strict=True)])
        out[f"all@{k}"] = _mean([float(q.evidence <= set(a.ids[:k])) for a, q in zip(answers, questions, strict=True)])
    by_category = {}
    for category in sorted({q.category for q in questions}):
        pairs = [(a, q) for a, q in zip(answers, questions, strict=True) if q.category == category]
        by_category[str(category)] = _mean([_recall(a.ids, q.evidence, 10) for a, q in pairs])
    out["recall@10_by_category"] = by_category
    return out


def _parts_found(answer: Answer, query: CompoundQuery, k: int) -> int:
    top = set(answer.ids[:k])
    return sum(1 for part in query.parts if part & top)


def score_compounds(answers: Sequence[Answer], queries: Sequence[CompoundQuery]) -> dict[str, Any]:
    """both@k: every part of the question has evidence in the top k (for two parts, both); by number of
    parts, all@k (every part) and both@k (at least two parts) for the N-part sets."""
    pairs = list(zip(answers, queries, strict=True))
    out: dict[str, Any] = {"n": len(queries)}
    for k in KS:
        out[f"both@{k}"] = _mean([float(_parts_found(a, q, k) == len(q.parts)) for a, q in pairs])
        out[f"recall@{k}"] = _mean([_recall(a.ids, q.evidence, k) for a, q in pairs])
    by_parts: dict[str, dict[str, float]] = {}
    for size in sorted({len(q.parts) for q in queries}):
        group = [(a, q) for a, q in pairs if len(q.parts) == size]
        row: dict[str, float] = {"n": len(group)}
        for k in KS:
            row[f"all@{k}"] = _mean([float(_parts_found(a, q, k) == size) for a, q in group])
            row[f"both@{k}"] = _mean([float(_parts_found(a, q, k) >= 2) for a, q in group])
        by_parts[str(size)] = row
    out["by_parts"] = by_parts
    return out


def _common(answers: Sequence[Answer]) -> dict[str, float]:
    return {"mean_results": _mean([len(a.ids) for a in answers]),
            "mean_context_tokens": _mean([a.context_tokens for a in answers]),
            "median_ms": round(statistics.median(a.seconds for a in answers) * 1000, 3) if answers else 0.0}


def _oracle_split(backend: InMemoryBackend, query: CompoundQuery, limit: int) -> Answer:
    """Reference: the original questions searched apart and interleaved (a perfect split)."""
    assert query.questions is not None
    start = time.perf_counter()
    lists = [backend.search(q, limit, NO_FILTERS) for q in query.questions]
    ids: list[str] = []
    for pair in zip_longest(*lists):
        ids.extend(h.id for h in pair if h is not None and h.id not in ids)
    return Answer(tuple(ids[:20]), 0, time.perf_counter() - start)


def evaluate(dataset: Dataset, compounds: Sequence[CompoundQuery], base: PipelineSettings,
             progress: Callable[[int], None] = lambda n: None, embedder: Embedder | None = None) -> dict[str, Any]:
    """Every system on the same backends: each conversation's memories with an empty link table
    (a new store's graph: no co-retrieval yet) and, with ``embedder``, their embeddings."""
    backends = {name: InMemoryBackend(memories, links=InMemoryAffinity(), embedder=embedder)
                for name, memories in dataset.memories.items()}
    report: dict[str, Any] = {}
    ferret: tuple[list[Answer], list[Answer]] | None = None
    for name, system in systems(base, embedder is not None).items():
        singles = [system(backends[q.conversation], q.text) for q in dataset.questions]
        progress(len(singles))
        multis = [system(backends[q.conversation], q.text) for q in compounds]
        progress(len(multis))
        if name == "ferret":
            ferret = (singles, multis)
        changed = {} if ferret is None else {"top10_changed_vs_ferret": _changed(ferret[0], singles),
                                              "top10_changed_vs_ferret_compound": _changed(ferret[1], multis)}
        report[name] = {"single": {**score_singles(singles, dataset.questions), **_common(singles)},
                        "compound": {**score_compounds(multis, compounds), **_common(multis)}, **changed}
    if compounds and all(q.questions for q in compounds):
        oracle = [_oracle_split(backends[q.conversation], q, base.search_limit_per_query) for q in compounds]
        report["reference_perfect_split"] = {"compound": {**score_compounds(oracle, compounds), **_common(oracle)}}
    report["false_split"] = false_splits(dataset.questions, base.max_sub_queries)
    report["sections"] = section_use(dataset, base)
    if embedder is not None:
        report["embedder"] = embedder.name
    return report


def _changed(reference: Sequence[Answer], answers: Sequence[Answer]) -> int:
    """Questions whose top 10 differs (ids or order) from the reference's."""
    return sum(a.ids[:10] != b.ids[:10] for a, b in zip(reference, answers, strict=True))


def section_use(dataset: Dataset, base: PipelineSettings) -> dict[str, Any]:
    """What the intent boost has to work with: the questions that ask for a section and the memories'
    sections (a boost that lifts every hit of a search alike reorders nothing within it)."""
    sections = sections_for(base.sections)
    asked: dict[str, int] = {}
    for question in dataset.questions:
        for section in sections.intents(question.text):
            asked[section.value] = asked.get(section.value, 0) + 1
    held: dict[str, int] = {}
    for memories in dataset.memories.values():
        for memory in memories:
            name = sections.of(memory).value
            held[name] = held.get(name, 0) + 1
    with_intent = sum(1 for q in dataset.questions if sections.intents(q.text))
    return {"questions_with_intent": with_intent, "of": len(dataset.questions), "asked": asked,
            "memories_by_section": held}


def is_split(text: str, max_parts: int) -> bool:
    """Whether decomposition splits ``text`` (as the pipeline reads it: mistyped question words mended)."""
    mended = mend_question_words(text)
    return decompose(mended, classify(mended), max_parts).was_decomposed


def false_splits(questions: Sequence[Question], max_parts: int) -> dict[str, Any]:
    """Single questions that decomposition would split (each of them a false split)."""
    split = [q.text for q in questions if is_split(q.text, max_parts)]
    return {"split": len(split), "of": len(questions), "rate": round(len(split) / max(1, len(questions)), 4),
            "examples": split[:10]}


def _differs(row: dict[str, Any]) -> str:
    if "top10_changed_vs_ferret" not in row:
        return ""
    return f"{row['top10_changed_vs_ferret']} / {row['top10_changed_vs_ferret_compound']}"


def markdown(report: dict[str, Any]) -> str:
    lines = ["| system | single R@5 | R@10 | R@20 | all@10 | compound both@5 | both@10 | both@20 | R@10 "
             "| results | ctx tokens | ms (median) | top 10 differs from ferret (single / compound) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, row in report.items():
        if "single" not in row or "compound" not in row:
            continue
        s, c = row["single"], row["compound"]
        lines.append(f"| {name} | {s['recall@5']:.3f} | {s['recall@10']:.3f} | {s['recall@20']:.3f} | "
                     f"{s['all@10']:.3f} | {c['both@5']:.3f} | {c['both@10']:.3f} | {c['both@20']:.3f} | "
                     f"{c['recall@10']:.3f} | {s['mean_results']:.1f} | {s['mean_context_tokens']:.0f} | "
                     f"{s['median_ms']:.2f} | {_differs(row)} |")
    oracle = report.get("reference_perfect_split")
    if oracle:
        c = oracle["compound"]
        lines.append(f"| reference: perfect split, interleaved | | | | | {c['both@5']:.3f} | {c['both@10']:.3f} | "
                     f"{c['both@20']:.3f} | {c['recall@10']:.3f} | | | | |")
    if report.get("embedder"):
        lines += ["", f"embeddings: {report['embedder']}; each text is embedded once, by the first system that asks "
                      "(ferret's times include its queries' embeddings, the later rows' mostly do not)"]
    rows = {name: row for name, row in report.items() if "compound" in row}
    sizes = sorted({size for row in rows.values() for size in row["compound"].get("by_parts", {})}, key=int)
    if any(int(size) > 2 for size in sizes):
        lines += ["", "compound queries by number of parts (all@k: every part found; both@k: at least two):", "",
                  "| system | parts | n | all@5 | all@10 | all@20 | both@10 |", "|---|---|---|---|---|---|---|"]
        for name, row in rows.items():
            for size in sizes:
                part = row["compound"].get("by_parts", {}).get(size)
                if part:
                    lines.append(f"| {name} | {size} | {part['n']:.0f} | {part['all@5']:.3f} | {part['all@10']:.3f} | "
                                 f"{part['all@20']:.3f} | {part['both@10']:.3f} |")
    used = report.get("sections")
    if used:
        asked = ", ".join(f"{name} {count}" for name, count in sorted(used["asked"].items())) or "none"
        held = ", ".join(f"{name} {count}" for name, count in sorted(used["memories_by_section"].items()))
        lines += ["", f"sections: {used['questions_with_intent']} of {used['of']} single questions ask for a "
                      f"section ({asked}); the memories' sections: {held}"]
    false = report.get("false_split")
    if false:
        lines += ["", f"false splits: {false['split']} of {false['of']} single questions would be decomposed "
                      f"(rate {false['rate']:.4f})"]
    return "\n".join(lines)
