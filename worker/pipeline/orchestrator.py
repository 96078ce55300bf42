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
from collections.abc import Sequence

from ferret.contract import Turn
from ferret.errors import BackendError, RerankFailed
from ferret.records import NO_FILTERS, Filters, Hit
from ferret.settings import PipelineSettings
from ferret.tracing import NoopTracer, Tracer
from ferret.worker.backends.base import Backend
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.complexity import Route
from ferret.worker.pipeline.diversity import diversify
from ferret.worker.pipeline.formatting import estimate_tokens, format_context
from ferret.worker.pipeline.merge import merge_and_select
from ferret.worker.pipeline.planning import plan
from ferret.worker.pipeline.replace import replace_weak
from ferret.worker.pipeline.rerank import Reranking, blend
from ferret.worker.pipeline.rewrite import rewrite
from ferret.worker.pipeline.run_state import (
    MIN_STAGE_SECONDS,
    RERANK_RESERVE_SECONDS,
    PipelineResult,
    PipelineRun,
    PipelineStats,
    Plan,
    PlanStats,
    PreparedStats,
)
from ferret.worker.pipeline.searching import search
from ferret.worker.pipeline.supersession import successors_first
from ferret.worker.pipeline.trivial import Prepared, prepare

__all__ = ["PipelineResult", "PipelineStats", "run_pipeline"]

logger = logging.getLogger(__name__)


def _replace(run: PipelineRun, merged: tuple[Hit, ...]) -> tuple[Hit, ...]:
    settings = run.settings
    if not run.budget.has(MIN_STAGE_SECONDS):
        run.skip("replace")
        return merged

    def search(query: str, limit: int) -> list[Hit]:
        return run.search(query, limit, run.filters)

    with run.tracer.span("replace") as span:
        outcome = replace_weak(merged, search, floor=settings.replacement_floor,
                               max_replacements=settings.max_replacements,
                               sub_queries=run.stats.plan.sub_queries, min_results=settings.min_results,
                               has_time=lambda: run.budget.has(MIN_STAGE_SECONDS), good_score=settings.good_score)
        span.set(attempted=outcome.attempted, successful=outcome.successful, dropped=len(outcome.dropped))
    run.timed("replace", span)
    run.stats.replace.replacements_attempted = outcome.attempted
    run.stats.replace.replacements_successful = outcome.successful
    return outcome.hits


def _rerank_wanted(run: PipelineRun, plan: Plan, requested: bool) -> bool:
    if requested:
        return True
    reranking = run.reranking
    return (reranking is not None and reranking.settings.enabled and reranking.settings.on_complex_route
            and plan.complexity.route is Route.COMPLEX)


def _rerank(run: PipelineRun, hits: tuple[Hit, ...], plan: Plan, requested: bool) -> tuple[Hit, ...]:
    """Re-order the top candidates by an LLM's relevance; any failure keeps the order."""
    if not _rerank_wanted(run, plan, requested):
        return hits
    reranking = run.reranking
    if reranking is None or reranking.scorer is None or not reranking.settings.enabled:
        run.stats.answer.rerank = "disabled"
        return hits
    settings = reranking.settings
    if len(hits) < 2:
        run.stats.answer.rerank = "too_few"
        return hits
    if not run.job_budget.has(settings.min_seconds_left + RERANK_RESERVE_SECONDS):
        run.stats.answer.rerank = "deadline"
        run.stats.skipped_stages.append("rerank")
        return hits
    candidates = hits[: settings.top_k]
    with run.tracer.span("rerank", candidates=len(candidates)) as span:
        try:
            timeout = min(settings.timeout_seconds, run.job_budget.remaining() - RERANK_RESERVE_SECONDS)
            scores = reranking.scorer.score(run.query, candidates, timeout)
        except RerankFailed as exc:
            logger.warning("stage=rerank falling back to the original order: %s", exc)
            run.stats.answer.rerank = exc.reason
            span.set(outcome=exc.reason, error=str(exc)[:200])
            reranked = hits
        else:
            run.stats.answer.rerank = "ok"
            reranked = blend(hits, scores, settings.weight, settings.top_k)
            span.set(outcome="ok", scored=len(scores))
    run.timed("rerank", span)
    return reranked


def _successors_first(run: PipelineRun, hits: tuple[Hit, ...]) -> tuple[Hit, ...]:
    """Each superseded memory below the memory that replaces it (``worker.pipeline.supersession``); the
    answer as it was when the store cannot tell now."""
    if not hits:
        return hits
    try:
        successors = run.backend.successors([hit.id for hit in hits])
    except BackendError as exc:
        logger.warning("stage=supersession skipped: %s", exc)
        return hits
    return successors_first(hits, successors)


def _finish(run: PipelineRun, hits: tuple[Hit, ...], sub_queries: tuple[str, ...]) -> PipelineResult:
    hits = _successors_first(run, hits)
    run.stats.answer.backend_calls = [(op, outcome, round(seconds, 6)) for op, outcome, seconds in run.backend.settle()]
    with run.tracer.span("format", hits=len(hits)) as span:
        context = format_context(hits, run.settings.max_context_tokens, run.sections)
        run.stats.answer.context_tokens = estimate_tokens(context)
    run.timed("format", span)
    return PipelineResult(hits=hits, context=context, stats=run.stats, partial=run.partial,
                          sub_queries=sub_queries)


def _single_search(run: PipelineRun) -> PipelineResult:
    """The off switch: one search, formatted, nothing else."""
    settings = run.settings
    with run.tracer.span("search", sub_queries=1) as span:
        hits = run.search(run.query, settings.search_limit_per_query, run.filters)
    run.timed("search", span)
    run.stats.plan.sub_queries = [run.query]
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
    recency_half_life_days: float | None = None,
    diversity: float | None = None,
) -> PipelineResult:
    """Run the whole retrieval pipeline for one query (``history``: the
    conversation's last turns, which resolve its references).

    ``rerank`` asks for the re-rank stage whatever the route; ``reranking``
    carries its settings and scorer (``None``: re-ranking is off).
    """
    if max_results is not None:
        settings = settings.model_copy(update={"max_results": max_results})
    if recency_half_life_days is not None or diversity is not None:  # the request's own, over the settings'
        settings = settings.model_copy(update={
            "recency_half_life_days": settings.recency_half_life_days if recency_half_life_days is None
            else recency_half_life_days,
            "diversity": settings.diversity if diversity is None else diversity})
    prepared = prepare(query, settings.trivial_messages, settings.strip_timestamps)
    if prepared.skip is not None:
        return _nothing_to_search(prepared, tracer or NoopTracer())
    tracer = tracer or NoopTracer()
    with tracer.span("rewrite", turns=len(history)) as span:
        rewritten = rewrite(prepared.query, history)
        span.set(resolved=len(rewritten.resolved), sub_questions=rewritten.sub_questions,
                 **({"query": rewritten.query} if record_query and rewritten.resolved else {}))
    run = PipelineRun(rewritten.query, backend, settings, filters, budget or Budget(), tracer, record_query, reranking)
    run.sub_questions_asked = rewritten.sub_questions
    run.stats.prepared.timestamp_stripped = bool(prepared.stripped) or None
    if rewritten.resolved:
        run.stats.prepared.references_resolved = len(rewritten.resolved)
        run.stats.prepared.rewritten_query = run.text(rewritten.query)
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
        stats = PipelineStats(PreparedStats(trivial=prepared.skip, timestamp_stripped=bool(prepared.stripped) or None),
                              PlanStats(route=Route.TRIVIAL.value),
                              skipped_stages=["classify", "decompose", "complexity", "search", "merge", "replace",
                                              "format"])
    return PipelineResult((), "", stats, partial=False, sub_queries=())


def _orchestrate(run: PipelineRun, use_remote_classifier: bool, rerank: bool) -> PipelineResult:
    settings = run.settings
    planned = plan(run, use_remote_classifier)
    if run.budget.expired():
        run.skip("search")
        return _finish(run, (), planned.decomposition.parts)
    outcomes = search(run, planned)
    run.stats.search.candidates = sum(len(o.hits) for o in outcomes)
    with run.tracer.span("merge") as span:
        merged = merge_and_select(
            outcomes, intents=planned.classification.intents, intent_boost=settings.intent_boost,
            subject_boost=settings.subject_boost, relevance_ratio=settings.relevance_ratio,
            max_results=settings.max_results,
            min_results=settings.min_results, good_score=settings.good_score,
            sections=run.sections, recency_half_life_days=settings.recency_half_life_days,
        )
        if settings.diversity is not None:
            merged = diversify(merged, settings.diversity)
        span.set(candidates=run.stats.search.candidates, selected=len(merged))
    run.timed("merge", span)
    final = _rerank(run, _replace(run, merged), planned, rerank)
    return _finish(run, final, planned.decomposition.parts)


def _cause_text(cause: Exception) -> str:
    return (str(cause) if isinstance(cause, BackendError) else f"{type(cause).__name__}: {cause}")[:300]


def _fallback(run: PipelineRun, cause: Exception) -> PipelineResult:
    """One plain search of the original question, in the time left."""
    run.stats.answer.fallback_cause = _cause_text(cause)
    if not run.budget.has(MIN_STAGE_SECONDS):
        run.stats.answer.fallback = "timeout"
        said = _cause_text(cause)
        raise _as_backend_error(run, cause, "no time was left for the fallback search" + (
            "" if "retrieval budget" in said or "the job's deadline" in said else f" ({run.bound_reached()})"))
    settings = run.settings
    with run.tracer.span("fallback", cause=run.stats.answer.fallback_cause) as span:
        timeout = run.budget.cap(settings.timeout_seconds)
        try:
            hits = run.bounded(lambda: run.backend.search(run.query, settings.search_limit_per_query, run.filters,
                                                          timeout=timeout))
        except BackendError as exc:
            run.stats.answer.fallback = "failed"
            span.set(outcome="failed", error=str(exc)[:300])
            raise _as_backend_error(run, cause, f"the fallback search failed too: {exc}") from exc
        if hits is None:
            run.stats.answer.fallback = "timeout"
            span.set(outcome="timeout")
            raise _as_backend_error(run, cause, "the fallback search did not answer in time")
        run.stats.answer.fallback = "ok"
        span.set(outcome="ok", hits=len(hits))
    run.timed("fallback", span)
    run.partial = True
    run.stats.plan.sub_queries = [run.query]
    ranked = tuple(sorted(hits, key=lambda h: (-h.score, h.id))[: settings.max_results])
    return _finish(run, ranked, (run.query,))


def _as_backend_error(run: PipelineRun, cause: Exception, how: str) -> BackendError:
    """The error a job fails with when the fallback could not save it."""
    if isinstance(cause, BackendError):
        error = cause
        error.args = (f"{cause}; {how}",)
    else:
        error = BackendError(run.backend.name, f"orchestration failed ({_cause_text(cause)}); {how}")
    error.fallback = run.stats.answer.fallback
    return error
