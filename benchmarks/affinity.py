"""The effect of the co-retrieval affinity signal on LoCoMo (local backend).

An agent's earlier retrievals build the co-retrieval weights; later questions
are scored with them. To measure generalisation rather than memorisation, each
conversation's questions are split by position: the even ones are the
"earlier use" (run through Ferret ``passes`` times, strengthening after each
job exactly as a worker does, with the automatic amount), the odd ones are
evaluated, with the affinity signal off and at each weight. The earlier use
runs with the signal off, so every weight is evaluated on the same weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.retrieval import Answer, _pipeline, score_singles
from ferret.bench.locomo import Dataset, Question
from ferret.settings import CoRetrievalSettings, PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.co_retrieval.affinity import AffinityBackend, InMemoryAffinity
from ferret.worker.co_retrieval.groups import groups_of
from ferret.worker.pipeline.orchestrator import run_pipeline

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.4)


def _split(questions: Sequence[Question]) -> tuple[list[Question], list[Question]]:
    used: list[Question] = []
    held_out: list[Question] = []
    seen: dict[str, int] = {}
    for question in questions:
        position = seen.get(question.conversation, 0)
        seen[question.conversation] = position + 1
        (used if position % 2 == 0 else held_out).append(question)
    return used, held_out


@dataclass(frozen=True)
class WarmLinks:
    """Each conversation's backend and the link table its earlier questions built, and the questions."""

    backends: dict[str, InMemoryBackend]
    tables: dict[str, InMemoryAffinity]
    used: list[Question]
    held_out: list[Question]
    passes: int


def warm_links(dataset: Dataset, pipeline: PipelineSettings, co_retrieval: CoRetrievalSettings,
               passes: int = 3) -> WarmLinks:
    """The earlier questions asked ``passes`` times, strengthening after each job as a worker does."""
    used, held_out = _split(dataset.questions)
    backends = {name: InMemoryBackend(memories) for name, memories in dataset.memories.items()}
    tables = {name: InMemoryAffinity() for name in backends}
    for _ in range(passes):
        for question in used:
            result = run_pipeline(question.text, backends[question.conversation], pipeline)
            groups = groups_of(result.hits, co_retrieval.max_group_size)
            tables[question.conversation].strengthen(groups, co_retrieval.amount)
    return WarmLinks(backends, tables, used, held_out, passes)


def fusion_on_warm_links(dataset: Dataset, warm: WarmLinks, systems: dict[str, PipelineSettings]) -> dict[str, Any]:
    """The graph retriever where it has links: the held-out questions, each system's recall."""
    linked = {name: InMemoryBackend(memories, links=warm.tables[name]) for name, memories in dataset.memories.items()}
    rows: dict[str, Any] = {}
    for name, settings in systems.items():
        system = _pipeline(settings)
        scored = score_singles([system(linked[q.conversation], q.text) for q in warm.held_out], warm.held_out)
        rows[name] = {k: scored[k] for k in ("recall@5", "recall@10", "recall@20", "all@10")}
    return {"earlier_questions": len(warm.used), "held_out_questions": len(warm.held_out), "passes": warm.passes,
            "systems": rows}


def fusion_markdown(report: dict[str, Any]) -> str:
    lines = [f"fusion where the graph has links ({report['earlier_questions']} earlier questions x "
             f"{report['passes']} passes; {report['held_out_questions']} held-out questions):", "",
             "| system | R@5 | R@10 | R@20 | all@10 |", "|---|---|---|---|---|"]
    for name, row in report["systems"].items():
        lines.append(f"| {name} | {row['recall@5']:.3f} | {row['recall@10']:.3f} | {row['recall@20']:.3f} | "
                     f"{row['all@10']:.3f} |")
    return "\n".join(lines)


def affinity_effect(dataset: Dataset, pipeline: PipelineSettings, co_retrieval: CoRetrievalSettings,
                    passes: int = 3, weights: Sequence[float] = WEIGHTS, warm: WarmLinks | None = None
                    ) -> dict[str, Any]:
    """``warm``: the links built already (else built here, ``passes`` times)."""
    warm = warm or warm_links(dataset, pipeline, co_retrieval, passes)
    backends, tables, used, held_out, passes = warm.backends, warm.tables, warm.used, warm.held_out, warm.passes
    links = sum(len(row) for table in tables.values() for row in table.table.values()) // 2
    rows: dict[str, Any] = {}
    baseline: list[tuple[str, ...]] | None = None
    for weight in weights:
        answers = []
        for question in held_out:
            backend = AffinityBackend(backends[question.conversation], tables[question.conversation], weight,
                                      co_retrieval.affinity_seeds)
            result = run_pipeline(question.text, backend, pipeline)
            answers.append(Answer(tuple(h.id for h in result.hits), result.stats.answer.context_tokens, 0.0))
        scored = score_singles(answers, held_out)
        tops = [a.ids[:10] for a in answers]
        baseline = baseline or tops
        changed = sum(top != base for top, base in zip(tops, baseline, strict=True))
        rows[f"{weight:g}"] = {**{k: scored[k] for k in ("recall@5", "recall@10", "recall@20", "all@10")},
                               "changed_top10": changed}
    return {"earlier_questions": len(used), "passes": passes, "amount": co_retrieval.amount,
            "held_out_questions": len(held_out), "links": links, "by_weight": rows}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"affinity: {report['earlier_questions']} earlier questions x {report['passes']} passes built "
             f"{report['links']} links (amount {report['amount']}); {report['held_out_questions']} held-out "
             "questions:", "",
             "| affinity_weight | R@5 | R@10 | R@20 | all@10 | top 10 changed |", "|---|---|---|---|---|---|"]
    for weight, row in report["by_weight"].items():
        lines.append(f"| {weight} | {row['recall@5']:.3f} | {row['recall@10']:.3f} | {row['recall@20']:.3f} | "
                     f"{row['all@10']:.3f} | {row['changed_top10']} |")
    return "\n".join(lines)
