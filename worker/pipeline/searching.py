"""The search stage: every sub-query searched in parallel, each by its retrievers fused by the plan's
weights (lexical, the graph from its best hits, semantic beside them), with the quality gate's one retry
when its hits are weak, and one widened try (the semantic retriever, else the words that begin with the
query's) when it found nothing. A failing sub-query yields no hits; only when none answered does the
stage fail."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from ferret.errors import BackendError, BackendUnavailable
from ferret.records import Hit, SubQueryOutcome
from ferret.text import lexical_form
from ferret.worker.backends.base import retrievers_of, widens
from ferret.worker.pipeline import quality_gate
from ferret.worker.pipeline.fusion import GRAPH, LEXICAL, SEMANTIC, Fused, fuse
from ferret.worker.pipeline.parallel import TimedOut, collect, run_parallel, start
from ferret.worker.pipeline.run_state import MIN_STAGE_SECONDS, NESTED_RESERVE_SECONDS, PipelineRun, Plan

logger = logging.getLogger(__name__)


def _retrieve(run: PipelineRun, query: str, plan: Plan, parent: str | None) -> tuple[list[Hit], str]:
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


def _note(run: PipelineRun, fused: Fused) -> None:
    record = run.stats.plan.fusion
    assert record is not None
    with run.lock:
        record["final_weights"].append(fused.weights)
        record["shifts"].append(fused.shifts)
        for name, count in fused.contributed.items():
            record["contributed"][name] += count
        record["adaptive"] += fused.mode == "adaptive"


def _extra(run: PipelineRun, name: str, call: Callable[[], list[Hit] | TimedOut | None]) -> list[Hit]:
    """A graph or semantic search: its hits, or none when it failed or did not answer in time."""
    try:
        hits = call()
    except Exception as exc:  # an extra retriever never fails the sub-query
        logger.warning("stage=fusion %s retriever failed: %s", name, exc)
        hits = None
    if hits is None or isinstance(hits, TimedOut):
        assert run.stats.plan.fusion is not None
        with run.lock:
            errors = run.stats.plan.fusion["errors"]
            errors[name] = errors.get(name, 0) + 1
        return []
    return list(hits)


def _search_one(run: PipelineRun, index: int, query: str, plan: Plan, parent: str | None) -> SubQueryOutcome:
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


def _widen(run: PipelineRun, query: str, plan: Plan) -> tuple[list[Hit], str | None]:
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


def search(run: PipelineRun, plan: Plan) -> list[SubQueryOutcome]:
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
                run.stats.search.sub_query_timeouts += 1
                run.partial = True
                outcomes.append(SubQueryOutcome(index, parts[index], (), timed_out=True))
                continue
            errors.append(slot)
            logger.warning("stage=search sub-query %d failed: %s", index, slot)
            outcomes.append(SubQueryOutcome(index, parts[index], (), error=str(slot)[:300]))
        run.stats.search.sub_query_errors = len(errors)
        run.stats.search.retries = sum(o.retried for o in outcomes)
        empty = [o.index for o in outcomes if o.empty]
        if empty:
            run.stats.search.empty_parts = empty
            run.stats.search.empty_parts_filled = sum(o.widened is not None for o in outcomes)
        span.set(errors=len(errors), timeouts=run.stats.search.sub_query_timeouts, retries=run.stats.search.retries)
    run.timed("search", span)
    if len(errors) + run.stats.search.sub_query_timeouts == len(parts):  # not one search answered
        if not errors:
            raise BackendUnavailable(run.backend.name, f"every search timed out at {run.bound_reached()}")
        first = errors[0]
        raise first if isinstance(first, BackendError) else BackendError(run.backend.name, str(first))
    return outcomes
