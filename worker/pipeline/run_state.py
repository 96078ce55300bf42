"""One pipeline run's shared state: its inputs, its budget, its stats, and the plan the first stages make.

Every stage of the orchestration reads the run (``PipelineRun``) and notes what it did in the run's stats
(``PipelineStats``, returned with the result in ``PipelineResult``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ferret.records import Filters, Hit
from ferret.settings import PipelineSettings
from ferret.tracing import Tracer
from ferret.worker.backends.base import Backend
from ferret.worker.backends.metered import MeteredBackend
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.classify import Classification
from ferret.worker.pipeline.complexity import Complexity, Route
from ferret.worker.pipeline.decompose import Decomposition
from ferret.worker.pipeline.fusion import WeightPlan
from ferret.worker.pipeline.parallel import TimedOut, call_with_timeout
from ferret.worker.pipeline.rerank import Reranking
from ferret.worker.pipeline.sections import sections_for

T = TypeVar("T")

# Below this much time left, optional stages (retry, replacement) are skipped.
MIN_STAGE_SECONDS = 0.005
# A call bounded inside a task that is itself bounded ends this long before it.
NESTED_RESERVE_SECONDS = 0.02
# The re-rank call stops this long before the deadline, leaving time to format and write.
RERANK_RESERVE_SECONDS = 0.1


@dataclass
class PreparedStats:
    """What the query's preparation did (``trivial``, ``rewrite``)."""

    trivial: str | None = None  # empty | trivial: nothing to search, so no search ran
    references_resolved: int | None = None  # references in the query resolved from the history
    rewritten_query: str | None = None  # the query after that (when query text may be recorded)
    timestamp_stripped: bool | None = None  # a leading timestamp was taken off before retrieval


@dataclass
class PlanStats:
    """What the planning stages decided (``planning``)."""

    complexity_score: float = 0.0
    route: str = Route.SIMPLE.value
    complexity_factors: dict[str, float] = field(default_factory=dict)  # each factor of the score, in [0, 1]
    complexity_override: str | None = None  # meta | ambiguous: an override raised the score
    query_type: str = ""
    disqualifiers: list[str] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    was_decomposed: bool = False
    decomposition_strategy: str = "none"
    sub_queries: list[str] = field(default_factory=list)
    remote_classifier: str = "off"
    fusion: dict[str, Any] | None = None  # set once the weights are assigned (see ferret.stats)


@dataclass
class SearchStats:
    """What the search stage found and tried (``searching``)."""

    retries: int = 0
    empty_parts: list[int] | None = None
    empty_parts_filled: int | None = None
    sub_query_errors: int = 0
    sub_query_timeouts: int = 0
    candidates: int = 0


@dataclass
class ReplaceStats:
    replacements_attempted: int = 0
    replacements_successful: int = 0


@dataclass
class AnswerStats:
    """The answer's last stages: the re-rank, seed 000's fallback, the backend's calls, the context."""

    context_tokens: int = 0
    rerank: str = "off"  # off | ok | disabled | deadline | too_few | timeout | error | malformed
    fallback: str | None = None  # ok | failed | timeout: seed 000's plain search was tried
    fallback_cause: str | None = None
    backend_calls: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass
class PipelineStats:
    """A run's stats, a small record per stage; ``to_dict`` is the flat form a job's stats take."""

    prepared: PreparedStats = field(default_factory=PreparedStats)
    plan: PlanStats = field(default_factory=PlanStats)
    search: SearchStats = field(default_factory=SearchStats)
    replace: ReplaceStats = field(default_factory=ReplaceStats)
    answer: AnswerStats = field(default_factory=AnswerStats)
    stage_ms: dict[str, float] = field(default_factory=dict)
    skipped_stages: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for record in (self.prepared, self.plan, self.search, self.replace, self.answer):
            flat.update(record.__dict__)
        flat.update(stage_ms=self.stage_ms, skipped_stages=self.skipped_stages)
        return flat


@dataclass(frozen=True)
class PipelineResult:
    hits: tuple[Hit, ...]
    context: str
    stats: PipelineStats
    partial: bool
    sub_queries: tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    classification: Classification
    decomposition: Decomposition
    complexity: Complexity
    limit: int
    weights: WeightPlan


class PipelineRun:
    """One pipeline run: the inputs every stage needs, and the stats."""

    def __init__(self, query: str, backend: Backend, settings: PipelineSettings,
                 filters: Filters, budget: Budget, tracer: Tracer, record_query: bool,
                 reranking: Reranking | None = None) -> None:
        self.query = query
        self.reranking = reranking
        self.backend = MeteredBackend(backend)
        self.settings = settings
        self.sections = sections_for(settings.sections)  # the boost's, the context's and the intents' table
        self.filters = filters
        self.job_budget = budget  # the job's deadline: bounds the re-rank
        self.budget = budget.within(settings.timeout_seconds)  # the orchestration's: bounds retrieval
        self.tracer = tracer
        self.record_query = record_query
        self.stats = PipelineStats()
        self.partial = False
        self.sub_questions_asked = 1  # what the rewritten query asks, as seed 002's bullet points count it
        self.lock = threading.Lock()  # sub-queries run in parallel and note their fusion in the stats

    def text(self, value: str | None) -> str | None:
        return value if self.record_query else None

    def bound_reached(self) -> str:
        """Which bound a retrieval that ran out of time reached, in words: the retrieval stages' budget (with
        time of the job's left: something answered too slowly, a store out of reach, a backend stuck), or the
        job's deadline."""
        left = self.job_budget.remaining()
        if left - self.budget.remaining() > MIN_STAGE_SECONDS and left > MIN_STAGE_SECONDS:
            return (f"the retrieval budget (pipeline.timeout_seconds, {self.settings.timeout_seconds:g} s) with "
                    f"{left:.1f} s of the job's deadline left: the backend or its store did not answer in time")
        return "the job's deadline"

    def skip(self, stage: str) -> None:
        self.stats.skipped_stages.append(stage)
        self.partial = True

    def timed(self, stage: str, span: Any) -> None:
        self.stats.stage_ms[stage] = round(span.duration_ms, 3)

    def bounded(self, call: Callable[[], T], reserve: float = 0.0) -> T | None:
        """``call()`` on the search pool, or None (and a partial result) when
        the budget, less ``reserve``, ends first; the call's own exception is raised."""
        answer = call_with_timeout(call, self.budget.remaining() - reserve)
        if isinstance(answer, TimedOut):
            self.partial = True
            return None
        return answer

    def search(self, query: str, limit: int, filters: Filters, reserve: float = 0.0) -> list[Hit]:
        """One backend search bounded by the budget: no hits if it has not answered in time."""
        timeout = self.budget.cap(self.settings.timeout_seconds)
        hits = self.bounded(lambda: self.backend.search(query, limit, filters, timeout=timeout), reserve)
        return hits if hits is not None else []
