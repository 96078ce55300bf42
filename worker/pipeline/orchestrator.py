"""The orchestrator: composes the stages under a deadline budget.

classify -> decompose -> complexity -> parallel search (each sub-query's
retrievers fused by its query type's weights, seed 002: ``fusion.py``) with
quality gate -> merge & select -> replace weak -> optional re-rank -> format. Each stage gets a span. Stages that
do not fit in the budget are skipped and recorded; the result is then
``partial``. The retrieval stages share one budget: ``timeout_seconds`` for
the whole orchestration, or the job's deadline when that comes first; every
backend call runs on the search pool and is abandoned when that budget ends,
whatever the backend does with its own timeout. The opt-in re-rank has its
own timeout and is bounded by the job's deadline alone. A failing sub-query yields no hits, not a failed job.

Seed 000's last resort: when every sub-query failed, or the orchestration
itself failed unexpectedly, one plain search of the original question is
made in the time left; its hits, formatted, are the answer, and the result
is ``partial`` (``stats.fallback``, a ``fallback`` span). Only when that
search fails too (or there is no time for it) is the error raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from ferret.contract import Turn
from ferret.errors import BackendError, BackendUnavailable, RerankFailed
from ferret.records import NO_FILTERS, Filters, Hit, SubQueryOutcome
from ferret.settings import PipelineSettings
from ferret.text import lexical_form
from ferret.tracing import NoopTracer, Tracer
from ferret.worker.backends.base import Backend, retrievers_of, widens
from ferret.worker.backends.metered import MeteredBackend
from ferret.worker.pipeline import quality_gate
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.classify import Classification, classify
from ferret.worker.pipeline.complexity import Complexity, Route, evaluate_complexity
from ferret.worker.pipeline.decompose import Decomposition, decompose
from ferret.worker.pipeline.formatting import estimate_tokens, format_context
from ferret.worker.pipeline.fusion import GRAPH, LEXICAL, RETRIEVERS, SEMANTIC, Fused, WeightPlan, assign_weights, fuse
from ferret.worker.pipeline.merge import merge_and_select
from ferret.worker.pipeline.parallel import TimedOut, call_with_timeout, collect, run_parallel, start
from ferret.worker.pipeline.replace import replace_weak
from ferret.worker.pipeline.rerank import Reranking, blend
from ferret.worker.pipeline.rewrite import rewrite
from ferret.worker.pipeline.sections import sections_for
from ferret.worker.pipeline.trivial import Prepared, prepare

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Below this much time left, optional stages (retry, replacement) are skipped.
MIN_STAGE_SECONDS = 0.005
# A call bounded inside a task that is itself bounded ends this long before it.
NESTED_RESERVE_SECONDS = 0.02
# The re-rank call stops this long before the deadline, leaving time to format and write.
RERANK_RESERVE_SECONDS = 0.1


@dataclass
class PipelineStats:
    complexity_score: float = 0.0
    route: str = Route.SIMPLE.value
    complexity_factors: dict[str, float] = field(default_factory=dict)  # each factor of the score, in [0, 1]
    complexity_override: str | None = None  # meta | ambiguous: an override raised the score
    trivial: str | None = None  # empty | trivial: nothing to search, so no search ran
    references_resolved: int | None = None  # references in the query resolved from the history
    rewritten_query: str | None = None  # the query after that (when query text may be recorded)
    timestamp_stripped: bool | None = None  # a leading timestamp was taken off before retrieval
    query_type: str = ""
    disqualifiers: list[str] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    was_decomposed: bool = False
    decomposition_strategy: str = "none"
    sub_queries: list[str] = field(default_factory=list)
    retries: int = 0
    empty_parts: list[int] | None = None
    empty_parts_filled: int | None = None
    replacements_attempted: int = 0
    replacements_successful: int = 0
    sub_query_errors: int = 0
    sub_query_timeouts: int = 0
    remote_classifier: str = "off"
    candidates: int = 0
    context_tokens: int = 0
    rerank: str = "off"  # off | ok | disabled | deadline | too_few | timeout | error | malformed
    fallback: str | None = None  # ok | failed | timeout: seed 000's plain search was tried
    fallback_cause: str | None = None
    stage_ms: dict[str, float] = field(default_factory=dict)
    skipped_stages: list[str] = field(default_factory=list)
    backend_calls: list[tuple[str, str, float]] = field(default_factory=list)
    fusion: dict[str, Any] | None = None  # set once the weights are assigned (see ferret.stats)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PipelineResult:
    hits: tuple[Hit, ...]
    context: str
    stats: PipelineStats
    partial: bool
    sub_queries: tuple[str, ...]


@dataclass(frozen=True)
class _Plan:
    classification: Classification
    decomposition: Decomposition
    complexity: Complexity
    limit: int
    weights: WeightPlan


class _Run:
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


def _remote_classification(run: _Run, local: Classification) -> Classification:
    timeout = run.budget.cap(run.settings.timeout_seconds)
    remote = run.bounded(lambda: run.backend.classify(run.query, timeout=timeout))
    if remote is None:
        run.stats.remote_classifier = "failed"
        return local
    run.stats.remote_classifier = "ok"
    extra = remote.get("disqualifier_category")
    codes = set(local.disqualifiers) | ({extra} if isinstance(extra, str) and extra else set())
    entity = local.entity or (remote.get("entity") if isinstance(remote.get("entity"), str) else None)
    return Classification(
        disqualifiers=tuple(sorted(codes)), query_type=local.query_type,
        confidence=local.confidence, entity=entity, attribute=local.attribute,
        entities=local.entities, intents=local.intents, keyword_matches=local.keyword_matches,
    )


def _plan(run: _Run, use_remote_classifier: bool) -> _Plan:
    with run.tracer.span("classify") as span:
        classification = classify(run.query, run.sections)
        if use_remote_classifier:
            classification = _remote_classification(run, classification)
        span.set(disqualifiers=list(classification.disqualifiers),
                 query_type=classification.query_type.value,
                 intents=[s.value for s in classification.intents])
    run.timed("classify", span)
    with run.tracer.span("decompose") as span:
        decomposition = decompose(run.query, classification, run.settings.max_sub_queries)
        span.set(parts=len(decomposition.parts), strategy=decomposition.strategy)
    run.timed("decompose", span)
    with run.tracer.span("complexity") as span:
        asked = max(len(decomposition.parts), run.sub_questions_asked)
        complexity = evaluate_complexity(classification, asked, run.query)
        span.set(score=complexity.score, route=complexity.route.value, formula_score=complexity.formula_score,
                 override=complexity.override or "none",
                 **{f"factor.{name}": round(value, 4) for name, value in complexity.factors.items()})
    run.timed("complexity", span)
    factor = 1.0 if complexity.route is Route.SIMPLE else run.settings.moderate_depth_factor
    limit = round(run.settings.search_limit_per_query * factor)
    stats = run.stats
    stats.complexity_score, stats.route = complexity.score, complexity.route.value
    stats.complexity_factors = {name: round(value, 4) for name, value in complexity.factors.items()}
    stats.complexity_override = complexity.override
    stats.query_type = classification.query_type.value
    stats.disqualifiers = list(classification.disqualifiers)
    stats.intents = [s.value for s in classification.intents]
    stats.was_decomposed = decomposition.was_decomposed
    stats.decomposition_strategy = decomposition.strategy
    stats.sub_queries = list(decomposition.parts)
    available = retrievers_of(run.backend)
    if decomposition.was_decomposed and not run.settings.fusion.semantic_on_parts:
        available = tuple(name for name in available if name != SEMANTIC)
    weights = assign_weights(classification, run.settings.fusion, available)
    stats.fusion = {"weights": weights.weights, "override": weights.override, "ran": list(weights.run),
                    "skipped": list(weights.skipped), "final_weights": [], "shifts": [],
                    "contributed": dict.fromkeys(RETRIEVERS, 0), "adaptive": 0, "errors": {}}
    return _Plan(classification, decomposition, complexity, limit, weights)


def _retrieve(run: _Run, query: str, plan: _Plan, parent: str | None) -> tuple[list[Hit], str]:
    """The sub-query's retrievers (seed 002): lexical, the graph from its best hits, semantic
    beside them; fused by the plan's weights. Also the lexical query text (the quality gate's
    retry must differ from it). A failing graph or semantic retriever counts as one with nothing."""
    settings, fusion, weights = run.settings, run.settings.fusion, plan.weights
    timeout = run.budget.cap(settings.timeout_seconds)
    lexical_query = lexical_form(query)
    semantic = (start(lambda: run.backend.similar(query, plan.limit, run.filters, timeout=timeout))
                if SEMANTIC in weights.run else None)
    results: dict[str, list[Hit]] = {
        LEXICAL: run.backend.search(lexical_query, plan.limit, run.filters, timeout=timeout)}
    if weights.run == (LEXICAL,):  # one retriever at full weight: fusion changes nothing
        _note(run, Fused(results[LEXICAL], weights.weights, contributed={LEXICAL: len(results[LEXICAL])}))
        return results[LEXICAL], lexical_query
    if GRAPH in weights.run:
        seeds = results[LEXICAL][: fusion.graph_seeds]
        results[GRAPH] = _extra(run, GRAPH, lambda: run.bounded(
            lambda: run.backend.linked(seeds, plan.limit, run.filters, timeout=timeout), NESTED_RESERVE_SECONDS))
    if semantic is not None:
        results[SEMANTIC] = _extra(run, SEMANTIC, lambda: collect(semantic, run.budget.remaining()
                                                                  - NESTED_RESERVE_SECONDS))
    with run.tracer.span("fusion", parent=parent) as span:
        fused = fuse(results, weights, fusion)
        span.set(**{f"weight.{k}": v for k, v in fused.weights.items()},
                 **{f"shift.{k}": v for k, v in fused.shifts.items()},
                 **{f"confidence.{k}": v for k, v in fused.confidence.items()},
                 **{f"contributed.{k}": v for k, v in fused.contributed.items()}, mode=fused.mode)
    _note(run, fused)
    return fused.hits, lexical_query


def _note(run: _Run, fused: Fused) -> None:
    record = run.stats.fusion
    assert record is not None
    with run.lock:
        record["final_weights"].append(fused.weights)
        record["shifts"].append(fused.shifts)
        for name, count in fused.contributed.items():
            record["contributed"][name] += count
        record["adaptive"] += fused.mode == "adaptive"


def _extra(run: _Run, name: str, call: Callable[[], list[Hit] | TimedOut | None]) -> list[Hit]:
    """A graph or semantic search: its hits, or none when it failed or did not answer in time."""
    try:
        hits = call()
    except Exception as exc:  # an extra retriever never fails the sub-query
        logger.warning("stage=fusion %s retriever failed: %s", name, exc)
        hits = None
    if hits is None or isinstance(hits, TimedOut):
        assert run.stats.fusion is not None
        with run.lock:
            errors = run.stats.fusion["errors"]
            errors[name] = errors.get(name, 0) + 1
        return []
    return list(hits)


def _search_one(run: _Run, index: int, query: str, plan: _Plan, parent: str | None) -> SubQueryOutcome:
    """One sub-query: search, then the quality gate's single retry if weak."""
    settings, budget = run.settings, run.budget
    with run.tracer.span("search.sub_query", parent=parent, index=index, query=run.text(query)) as span:
        hits, searched = _retrieve(run, query, plan, span.span_id)
        retried, reformulation = False, None
        for _ in range(settings.max_retries):
            if not quality_gate.is_weak(hits, settings.quality_threshold):
                break
            reformulation = quality_gate.reformulate(query, plan.classification)
            if reformulation is None or not budget.has(MIN_STAGE_SECONDS):
                break
            if reformulation == searched and run.filters.subtype is None:
                break  # the lexical retriever searched just that already: the retry would repeat it
            logger.debug("stage=quality_gate retrying weak sub-query %d", index)
            # Bounded inside the sub-query's own task, a little early: a hung retry keeps the first hits.
            extra = run.search(reformulation, plan.limit, run.filters.without_subtype(), NESTED_RESERVE_SECONDS)
            hits = list(quality_gate.merge_by_id(hits, extra))
            retried = True
        empty, widened = not hits, None
        if empty and settings.widen_empty_parts and budget.has(MIN_STAGE_SECONDS):
            hits, widened = _widen(run, query, plan)
        span.set(hits=len(hits), top_score=max((h.score for h in hits), default=0.0), retried=retried,
                 reformulation=run.text(reformulation) if retried else None, empty=empty, widened=widened)
    return SubQueryOutcome(index=index, query=query, hits=tuple(hits), retried=retried,
                           reformulation=reformulation if retried else None, widened=widened, empty=empty)


def _widen(run: _Run, query: str, plan: _Plan) -> tuple[list[Hit], str | None]:
    """One more try for a sub-query that found nothing: the semantic retriever when it is on (the backend
    has it, ``fusion.semantic_share`` > 0) and the plan left it out, else the words that begin with the
    query's words (``word_family``)."""
    timeout = run.budget.cap(run.settings.timeout_seconds)
    tries: list[tuple[str, Callable[[], list[Hit]]]] = []
    if SEMANTIC in retrievers_of(run.backend) and run.settings.fusion.semantic_share > 0 \
            and SEMANTIC not in plan.weights.run:
        tries.append((SEMANTIC, lambda: run.backend.similar(query, plan.limit, run.filters, timeout=timeout)))
    if widens(run.backend):
        tries.append(("word_family", lambda: run.backend.widened(query, plan.limit, run.filters, timeout=timeout)))
    for name, call in tries:
        found = _extra(run, name, partial(run.bounded, call, NESTED_RESERVE_SECONDS))
        if found:
            return found, name
    return [], None


def _search(run: _Run, plan: _Plan) -> list[SubQueryOutcome]:
    parts = plan.decomposition.parts
    with run.tracer.span("search", sub_queries=len(parts), limit=plan.limit) as span:
        tasks = [
            (lambda i=i, q=q: _search_one(run, i, q, plan, span.span_id)) for i, q in enumerate(parts)
        ]
        slots = run_parallel(tasks, timeout=run.budget.cap(run.settings.timeout_seconds))
        outcomes: list[SubQueryOutcome] = []
        errors: list[BaseException] = []
        for index, slot in enumerate(slots):
            if isinstance(slot, SubQueryOutcome):
                outcomes.append(slot)
                continue
            if isinstance(slot, TimedOut):
                run.stats.sub_query_timeouts += 1
                run.partial = True
                outcomes.append(SubQueryOutcome(index, parts[index], (), timed_out=True))
                continue
            errors.append(slot)
            logger.warning("stage=search sub-query %d failed: %s", index, slot)
            outcomes.append(SubQueryOutcome(index, parts[index], (), error=str(slot)[:300]))
        run.stats.sub_query_errors = len(errors)
        run.stats.retries = sum(o.retried for o in outcomes)
        empty = [o.index for o in outcomes if o.empty]
        if empty:
            run.stats.empty_parts = empty
            run.stats.empty_parts_filled = sum(o.widened is not None for o in outcomes)
        span.set(errors=len(errors), timeouts=run.stats.sub_query_timeouts, retries=run.stats.retries)
    run.timed("search", span)
    if len(errors) + run.stats.sub_query_timeouts == len(parts):  # not one search answered
        if not errors:
            raise BackendUnavailable(run.backend.name, "every search timed out at the job's deadline")
        first = errors[0]
        raise first if isinstance(first, BackendError) else BackendError(run.backend.name, str(first))
    return outcomes


def _replace(run: _Run, merged: tuple[Hit, ...]) -> tuple[Hit, ...]:
    settings = run.settings
    if not run.budget.has(MIN_STAGE_SECONDS):
        run.skip("replace")
        return merged

    def search(query: str, limit: int) -> list[Hit]:
        return run.search(query, limit, run.filters)

    with run.tracer.span("replace") as span:
        outcome = replace_weak(merged, search, floor=settings.replacement_floor,
                               max_replacements=settings.max_replacements,
                               sub_queries=run.stats.sub_queries, min_results=settings.min_results,
                               has_time=lambda: run.budget.has(MIN_STAGE_SECONDS), good_score=settings.good_score)
        span.set(attempted=outcome.attempted, successful=outcome.successful, dropped=len(outcome.dropped))
    run.timed("replace", span)
    run.stats.replacements_attempted = outcome.attempted
    run.stats.replacements_successful = outcome.successful
    return outcome.hits


def _rerank_wanted(run: _Run, plan: _Plan, requested: bool) -> bool:
    if requested:
        return True
    reranking = run.reranking
    return (reranking is not None and reranking.settings.enabled and reranking.settings.on_complex_route
            and plan.complexity.route is Route.COMPLEX)


def _rerank(run: _Run, hits: tuple[Hit, ...], plan: _Plan, requested: bool) -> tuple[Hit, ...]:
    """Re-order the top candidates by an LLM's relevance; any failure keeps the order."""
    if not _rerank_wanted(run, plan, requested):
        return hits
    reranking = run.reranking
    if reranking is None or reranking.scorer is None or not reranking.settings.enabled:
        run.stats.rerank = "disabled"
        return hits
    settings = reranking.settings
    if len(hits) < 2:
        run.stats.rerank = "too_few"
        return hits
    if not run.job_budget.has(settings.min_seconds_left + RERANK_RESERVE_SECONDS):
        run.stats.rerank = "deadline"
        run.stats.skipped_stages.append("rerank")
        return hits
    candidates = hits[: settings.top_k]
    with run.tracer.span("rerank", candidates=len(candidates)) as span:
        try:
            timeout = min(settings.timeout_seconds, run.job_budget.remaining() - RERANK_RESERVE_SECONDS)
            scores = reranking.scorer.score(run.query, candidates, timeout)
        except RerankFailed as exc:
            logger.warning("stage=rerank falling back to the original order: %s", exc)
            run.stats.rerank = exc.reason
            span.set(outcome=exc.reason, error=str(exc)[:200])
            reranked = hits
        else:
            run.stats.rerank = "ok"
            reranked = blend(hits, scores, settings.weight, settings.top_k)
            span.set(outcome="ok", scored=len(scores))
    run.timed("rerank", span)
    return reranked


def _finish(run: _Run, hits: tuple[Hit, ...], sub_queries: tuple[str, ...]) -> PipelineResult:
    run.stats.backend_calls = [(op, outcome, round(seconds, 6)) for op, outcome, seconds in run.backend.settle()]
    with run.tracer.span("format", hits=len(hits)) as span:
        context = format_context(hits, run.settings.max_context_tokens, run.sections)
        run.stats.context_tokens = estimate_tokens(context)
    run.timed("format", span)
    return PipelineResult(hits=hits, context=context, stats=run.stats, partial=run.partial,
                          sub_queries=sub_queries)


def _single_search(run: _Run) -> PipelineResult:
    """The off switch: one search, formatted, nothing else."""
    settings = run.settings
    with run.tracer.span("search", sub_queries=1) as span:
        hits = run.search(run.query, settings.search_limit_per_query, run.filters)
    run.timed("search", span)
    run.stats.sub_queries = [run.query]
    ranked = tuple(sorted(hits, key=lambda h: (-h.score, h.id))[: settings.max_results])
    return _finish(run, ranked, (run.query,))


def run_pipeline(
    query: str,
    backend: Backend,
    settings: PipelineSettings,
    *,
    filters: Filters = NO_FILTERS,
    budget: Budget | None = None,
    tracer: Tracer | None = None,
    max_results: int | None = None,
    record_query: bool = True,
    use_remote_classifier: bool = False,
    reranking: Reranking | None = None,
    rerank: bool = False,
    history: Sequence[Turn] = (),
) -> PipelineResult:
    """Run the whole retrieval pipeline for one query (``history``: the
    conversation's last turns, which resolve its references).

    ``rerank`` asks for the re-rank stage whatever the route; ``reranking``
    carries its settings and scorer (``None``: re-ranking is off).
    """
    if max_results is not None:
        settings = settings.model_copy(update={"max_results": max_results})
    prepared = prepare(query, settings.trivial_messages, settings.strip_timestamps)
    if prepared.skip is not None:
        return _nothing_to_search(prepared, tracer or NoopTracer())
    tracer = tracer or NoopTracer()
    with tracer.span("rewrite", turns=len(history)) as span:
        rewritten = rewrite(prepared.query, history)
        span.set(resolved=len(rewritten.resolved), sub_questions=rewritten.sub_questions,
                 **({"query": rewritten.query} if record_query and rewritten.resolved else {}))
    run = _Run(rewritten.query, backend, settings, filters, budget or Budget(), tracer, record_query, reranking)
    run.sub_questions_asked = rewritten.sub_questions
    run.stats.timestamp_stripped = bool(prepared.stripped) or None
    if rewritten.resolved:
        run.stats.references_resolved = len(rewritten.resolved)
        run.stats.rewritten_query = run.text(rewritten.query)
    run.timed("rewrite", span)
    if not settings.enabled:
        return _single_search(run)
    try:
        return _orchestrate(run, use_remote_classifier, rerank)
    except BackendError as exc:
        cause: Exception = exc
    except Exception as exc:  # any failure of the orchestration gets the fallback
        logger.exception("stage=orchestrate failed unexpectedly; falling back to a plain search")
        cause = exc
    try:
        return _fallback(run, cause)
    except BackendError as exc:
        exc.calls = run.backend.settle()
        raise


def _nothing_to_search(prepared: Prepared, tracer: Tracer) -> PipelineResult:
    """A trivial message or a bare timestamp: an answer with no results and no search."""
    with tracer.span("trivial", reason=prepared.skip or ""):
        stats = PipelineStats(route=Route.TRIVIAL.value, trivial=prepared.skip,
                              timestamp_stripped=bool(prepared.stripped) or None,
                              skipped_stages=["classify", "decompose", "complexity", "search", "merge", "replace",
                                              "format"])
    return PipelineResult((), "", stats, partial=False, sub_queries=())


def _orchestrate(run: _Run, use_remote_classifier: bool, rerank: bool) -> PipelineResult:
    settings = run.settings
    plan = _plan(run, use_remote_classifier)
    if run.budget.expired():
        run.skip("search")
        return _finish(run, (), plan.decomposition.parts)
    outcomes = _search(run, plan)
    run.stats.candidates = sum(len(o.hits) for o in outcomes)
    with run.tracer.span("merge") as span:
        merged = merge_and_select(
            outcomes, intents=plan.classification.intents, intent_boost=settings.intent_boost,
            subject_boost=settings.subject_boost, relevance_ratio=settings.relevance_ratio,
            max_results=settings.max_results,
            min_results=settings.min_results, good_score=settings.good_score,
            sections=run.sections,
        )
        span.set(candidates=run.stats.candidates, selected=len(merged))
    run.timed("merge", span)
    final = _rerank(run, _replace(run, merged), plan, rerank)
    return _finish(run, final, plan.decomposition.parts)


def _cause_text(cause: Exception) -> str:
    return (str(cause) if isinstance(cause, BackendError) else f"{type(cause).__name__}: {cause}")[:300]


def _fallback(run: _Run, cause: Exception) -> PipelineResult:
    """One plain search of the original question, in the time left."""
    run.stats.fallback_cause = _cause_text(cause)
    if not run.budget.has(MIN_STAGE_SECONDS):
        run.stats.fallback = "timeout"
        raise _as_backend_error(run, cause, "no time was left for the fallback search")
    settings = run.settings
    with run.tracer.span("fallback", cause=run.stats.fallback_cause) as span:
        timeout = run.budget.cap(settings.timeout_seconds)
        try:
            hits = run.bounded(lambda: run.backend.search(run.query, settings.search_limit_per_query, run.filters,
                                                          timeout=timeout))
        except BackendError as exc:
            run.stats.fallback = "failed"
            span.set(outcome="failed", error=str(exc)[:300])
            raise _as_backend_error(run, cause, f"the fallback search failed too: {exc}") from exc
        if hits is None:
            run.stats.fallback = "timeout"
            span.set(outcome="timeout")
            raise _as_backend_error(run, cause, "the fallback search did not answer in time")
        run.stats.fallback = "ok"
        span.set(outcome="ok", hits=len(hits))
    run.timed("fallback", span)
    run.partial = True
    run.stats.sub_queries = [run.query]
    ranked = tuple(sorted(hits, key=lambda h: (-h.score, h.id))[: settings.max_results])
    return _finish(run, ranked, (run.query,))


def _as_backend_error(run: _Run, cause: Exception, how: str) -> BackendError:
    """The error a job fails with when the fallback could not save it."""
    if isinstance(cause, BackendError):
        error = cause
        error.args = (f"{cause}; {how}",)
    else:
        error = BackendError(run.backend.name, f"orchestration failed ({_cause_text(cause)}); {how}")
    error.fallback = run.stats.fallback
    return error
