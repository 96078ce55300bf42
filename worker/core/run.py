"""One job, from its payload to its one final result: ``run_job``.

Every payload ends in exactly one stored result: ``expired`` when the job
starts after its deadline, ``failed`` with a clear error for bad payloads,
backend failures, hard timeouts and unexpected errors (with the trace of
the stages that ran), ``partial`` when the deadline cut the pipeline short,
else ``ok``. A payload whose job id is not the one its namespace and request
id give is refused without running. The core knows nothing of RQ: the RQ
adapter (``ferret.rq_layer.entry``) calls it, and so do ``ferret run`` and the benchmarks.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ferret.cache import cache_entry, cache_key, cacheable, read_entry
from ferret.contract import ResultItem, RetrievalRequest
from ferret.envelope import JobEnvelope
from ferret.errors import BackendError, InvalidRequest
from ferret.job_ids import binds
from ferret.signing import job_signature_problem
from ferret.stats import JobStats
from ferret.tracing import Span, SpanCollector, new_span_id
from ferret.worker.agent.job import AgentAnswer, agent_wanted, run_agent
from ferret.worker.agent.loop import empty_stats
from ferret.worker.core.held_results import HOLD_MARGIN_SECONDS, HeldResult
from ferret.worker.core.report import JobReport
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import (
    ResultDropped,
    build_result,
    record_refusal,
    stamps_of,
    trace_id_of,
    write_with_trace,
)
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.rerank import Reranking
from ferret.worker.pipeline.sections import sections_for
from ferret.worker.results_builder import fit_result, result_items

logger = logging.getLogger(__name__)


def _queue_wait_span(tracer: SpanCollector, env: JobEnvelope, started_ns: int) -> None:
    tracer.add(Span("queue_wait", tracer.trace_id, new_span_id(), tracer.root_span_id,
                    int(env.enqueued_at * 1e9), started_ns))


@dataclass
class _Outcome:
    status: str
    results: list[ResultItem] = field(default_factory=list)
    context: str = ""
    error: str | None = None
    stats: JobStats = field(default_factory=JobStats)
    cache: tuple[str, bytes, int] | None = None  # an entry to write with the result


def _cached(ctx: WorkerResources, env: JobEnvelope, request: RetrievalRequest,
            tracer: SpanCollector) -> tuple[str | None, float, _Outcome | None]:
    """The cache key for this request, the look-up's milliseconds, and the cached outcome if any."""
    if not ctx.settings.cache.enabled or not request.options.cache:
        return None, 0.0, None
    with tracer.span("cache") as span:
        version = env.memory_version
        if version is None:
            version = ctx.backends.version(request.namespace)
        key = cache_key(request, ctx.settings.backend.kind, version, ctx.fingerprint)
        raw = ctx.client.get(key)
        span.set(hit=raw is not None)
    looked_up_ms = round(span.duration_ms, 3)
    if raw is None:
        return key, looked_up_ms, None
    try:
        results, context, stats = read_entry(raw, looked_up_ms)
    except (ValueError, KeyError, TypeError) as exc:
        logger.warning("cache entry %s is not an answer (%s): served as a miss", key, str(exc)[:200])
        return key, looked_up_ms, None
    return key, looked_up_ms, _Outcome("ok", results, context, stats=stats)


def _run(ctx: WorkerResources, env: JobEnvelope, job_id: str, tracer: SpanCollector, started_at: float) -> _Outcome:
    request = env.request
    remaining = env.deadline_at - started_at
    if remaining <= 0:
        return _Outcome("expired", error=f"started {-remaining:.3f}s after its deadline")
    key, looked_up_ms, hit = _cached(ctx, env, request, tracer)
    if hit is not None:
        return hit
    budget = Budget.of_seconds(remaining)
    try:
        with tracer.span("pipeline") as span:
            with tracer.span("index") as index_span:
                backend = ctx.backends.for_namespace(request.namespace, env.memory_version,
                                                     wait_seconds=budget.remaining() / 2)
                readiness = getattr(backend, "readiness", None)
                if readiness is not None:
                    index_span.set(how=readiness.how, changes=readiness.changes, evictions=readiness.evictions,
                                   staged=readiness.staged, folded=readiness.folded,
                                   fold_ms=round(readiness.fold_ms, 3), fold_taken=readiness.fold_taken)
            outcome = run_pipeline(
                request.query, backend, ctx.settings.pipeline, filters=request.filters, budget=budget,
                tracer=tracer, max_results=request.options.max_results,
                record_query=ctx.settings.service.record_query_text,
                use_remote_classifier=ctx.settings.backend.nous.use_remote_classifier,
                reranking=Reranking(ctx.settings.rerank, ctx.scorer), rerank=request.options.rerank,
                history=request.history, recency_half_life_days=request.options.recency_half_life_days,
                diversity=request.options.diversity,
            )
            span.set(partial=outcome.partial)
        agent: AgentAnswer | None = None
        if agent_wanted(ctx.settings, request, outcome.stats.plan.route):
            agent = run_agent(ctx.settings, ctx.agent_chat, request, backend, outcome, budget, tracer,
                              ctx.settings.service.record_query_text)
    except BackendError as exc:
        logger.warning("job=%s stage=search backend failed: %s", job_id, exc)
        return _Outcome("failed", error=str(exc), stats=JobStats(backend_calls=exc.calls, fallback=exc.fallback))
    status = "partial" if outcome.partial or budget.expired() else "ok"
    fields = outcome.stats.to_dict()  # the job's own fields added, then validated once
    hits, sub_queries, context = outcome.hits, outcome.sub_queries, outcome.context
    if agent is not None:
        hits, sub_queries, context = agent.hits, agent.sub_queries, agent.context
        status = "partial" if agent.partial else status
        fields["agent"] = agent.stats
    elif request.options.agent:
        fields["agent"] = empty_stats("disabled")
    if readiness is not None:
        fields.update(index=readiness.how, index_evictions=readiness.evictions or None,
                      index_changes=readiness.changes or None, index_staged=readiness.staged or None,
                      index_folded=readiness.folded or None,
                      index_fold_ms=round(readiness.fold_ms, 3) if readiness.folded else None,
                      index_fold_taken=readiness.fold_taken or None)
    if key is not None:
        fields.update(cache_hit=False, stage_ms={"cache": looked_up_ms, **(fields.get("stage_ms") or {})})
    stats = JobStats.model_validate(fields)
    items = result_items(hits, sub_queries, sections_for(ctx.settings.pipeline.sections))
    done = _Outcome(status, items, context, stats=stats)
    if key is not None and cacheable(status, stats):
        ttl = ctx.settings.cache.ttl_for(ctx.settings.backend.kind)
        done.cache = (key, cache_entry(done.results, done.context, stats), ttl)
    return done


def run_job(ctx: WorkerResources, payload: Any, job_id: str, origin: str | None = None,
            hard_timeout: type[BaseException] | tuple[type[BaseException], ...] = (),
            hold: Callable[[HeldResult], None] | None = None, signature_checked: bool = False) -> JobReport:
    """Run one job payload to its single final result, store it, and report it.
    A payload that is not a request of the namespace its job id names is refused
    (``JobRefused``): nothing is written under the id (see ``record_refusal``).

    ``hard_timeout``: what the queue system raises when the job's hard time
    limit strikes (RQ's ``JobTimeoutException``); it ends the job ``failed``.
    ``hold``: given, the result is handed to it to be written with its trip's others
    (``ferret.worker.core.held_results``) and the report says ``held``; not when the job's deadline is
    less than ``HOLD_MARGIN_SECONDS`` away (an expired job's result is written at once: a reaper ends a
    started job a second past its deadline + grace as overrun, and a held one is still started).
    ``signature_checked``: the payload rode in a carrier whose signature, checked, covers it
    (``ferret.carriers``); it has none of its own."""
    started_at = ctx.now()  # Redis's clock: the producer's enqueue time and deadline are on it too
    started_ns = int(started_at * 1e9)
    tracer = SpanCollector(max_spans=ctx.settings.limits.max_trace_spans, clock_ns=lambda: int(ctx.now() * 1e9))
    key = ctx.results.signing_key
    problem = job_signature_problem(key, job_id, payload) if key is not None and not signature_checked else None
    if problem is not None:
        raise record_refusal(ctx, job_id, origin or "?", "bad_signature", problem, trace_id_of(payload))
    try:
        env = JobEnvelope.parse(payload, ctx.settings.limits)
    except InvalidRequest as exc:  # no producer enqueues this: whose id it names is unknown
        raise record_refusal(ctx, job_id, origin or "?", "malformed_job", f"invalid request: {exc}",
                             trace_id_of(payload)) from None
    request = env.request
    if env.trace_id:
        tracer.trace_id = env.trace_id
    if not binds(job_id, request.namespace, request.request_id):
        raise record_refusal(ctx, job_id, origin or "?", "tenant_mismatch",
                             "job id does not belong to the request's namespace and request id; not run")
    with tracer.span("job", queue=request.queue, namespace=request.namespace) as root:
        tracer.root_span_id = root.span_id
        root.start_time_unix_nano = min(started_ns, int(env.enqueued_at * 1e9))
        _queue_wait_span(tracer, env, started_ns)
        skips_before = ctx.health.skips() if ctx.health is not None else {}
        try:
            outcome = _run(ctx, env, job_id, tracer, started_at)
        except hard_timeout:
            outcome = _Outcome("failed", error="hard timeout: a stage hung past the job's deadline")
        except Exception as exc:  # unexpected: still one final result, with the trace naming the stage
            logger.exception("job=%s unexpected failure", job_id)
            outcome = _Outcome("failed", error=f"internal error: {type(exc).__name__}: {exc}")
        skipped = ctx.health.skipped_since(skips_before) if ctx.health is not None else []
        stats = outcome.stats.with_(circuit_open=skipped) if skipped else outcome.stats
        fields: dict[str, Any] = {
            "error": outcome.error, "stats": stats, "results": outcome.results,
            "context": outcome.context if request.options.format == "text" else "",
        }
        with tracer.span("result_write"):
            result = build_result(ctx, stamps_of(env, job_id), request, outcome.status, started_at, tracer.trace_id,
                             **fields)
            result, body = fit_result(result, ctx.settings.limits.max_result_bytes)
        root.set(status=outcome.status)
    if hold is not None and env.deadline_at - ctx.now() > HOLD_MARGIN_SECONDS:
        report = JobReport(result, request, None, held=True)
        try:
            report = _folded_after(ctx, report)
        except Exception:  # off the job's path: its result, held, stands (as a written one would)
            logger.exception("job=%s committing staged index changes after the job failed", job_id)
        hold(HeldResult(ctx, result, tracer, outcome.cache, body, report))
        return report
    try:
        result, trace = write_with_trace(ctx, result, tracer, outcome.cache, body)
    except ResultDropped as dropped:  # a late run: the job's one result is another run's
        return JobReport(dropped.result, request, None, dropped=True)
    took = (ctx.now() - started_at) * 1000
    logger.debug("job=%s status=%s results=%d took_ms=%.1f", job_id, result.status, len(result.results), took)
    return _folded_after(ctx, JobReport(result, request, trace))


def _folded_after(ctx: WorkerResources, report: JobReport) -> JobReport:
    """``report``, with the staged index changes committed now that the result is written (or held): what
    is left to do is off the job's path."""
    after_job = getattr(ctx.backends, "after_job", None)
    if after_job is None:
        return report
    folded, fold_ms, taken = after_job()
    return dataclasses.replace(report, folded_after=folded, fold_after_ms=fold_ms,
                               folds_taken_after=taken) if folded else report


