"""The RQ job: a thin adapter. Parse the payload, run the pipeline under the
job's deadline, store the result and the trace.

Every payload ends in exactly one stored result: ``expired`` when the job
starts after its deadline, ``failed`` with a clear error for bad payloads,
backend failures and hard timeouts, ``partial`` when the deadline cut the
pipeline short, else ``ok``. Clients (Redis, httpx, indexes) are built once
per worker process by ``WorkerContext``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from rq import get_current_job
from rq.timeouts import JobTimeoutException

from ferret.cache import cache_entry, cache_key, cacheable, read_entry
from ferret.contract import (
    NAMESPACE_PATTERN,
    REQUEST_ID_PATTERN,
    ResultItem,
    RetrievalRequest,
    RetrievalResult,
    Timestamps,
    parse_request,
)
from ferret.envelope import JobEnvelope, deadline_of, epoch_field
from ferret.errors import BackendError, FerretError, InvalidRequest
from ferret.job_ids import binds
from ferret.results import ResultStore, WriteOutcome
from ferret.settings import LimitSettings, Settings, load_settings
from ferret.stats import JobStats
from ferret.tracing import Span, SpanCollector, new_span_id, new_trace_id
from worker.backends.factory import Backends, build_backends
from worker.llm.reranker import LLMScorer
from worker.pipeline.budget import Budget
from worker.pipeline.orchestrator import run_pipeline
from worker.pipeline.rerank import Reranking
from worker.results_builder import fit_result, result_items

logger = logging.getLogger(__name__)

@dataclass
class WorkerContext:
    settings: Settings
    client: redis.Redis
    backends: Backends
    results: ResultStore
    name: str
    scorer: LLMScorer | None = None  # the re-rank stage's LLM, when switched on


_context: WorkerContext | None = None
_finished: dict[str, RetrievalResult] = {}  # results of jobs run in this process, for metrics


def take_finished(job_id: str) -> RetrievalResult | None:
    """The result of ``job_id`` if this process ran it (and forget it)."""
    return _finished.pop(job_id, None)


def init_context(settings: Settings, client: redis.Redis) -> WorkerContext:
    """Build the per-process clients; called at worker start-up."""
    global _context
    _context = WorkerContext(
        settings=settings,
        client=client,
        backends=build_backends(settings, client),
        results=ResultStore(client, settings.service.result_ttl_seconds, settings.service.trace_ttl_seconds),
        name=f"{socket.gethostname()}:{os.getpid()}",
        scorer=LLMScorer(settings.rerank) if settings.rerank.enabled else None,
    )
    return _context


def _get_context(connection: redis.Redis | None) -> WorkerContext:
    """This process's context; a forked work horse builds its own clients
    from the settings its parent was started with (never the environment's
    defaults: ``ferret --config FILE worker`` must mean the same in both classes)."""
    if _context is None or _context.name.rsplit(":", 1)[1] != str(os.getpid()):
        settings = _context.settings if _context is not None else load_settings()
        if connection is None:
            raise FerretError("no worker context and no RQ connection")
        return init_context(settings, connection)
    return _context


@dataclass
class _Stamps:
    """What a result needs of its job, whether or not its payload was valid."""

    job_id: str
    enqueued_at: float
    deadline_at: float
    raw_request: Any = None  # ids are copied from it, when well formed, for an invalid request
    origin: str | None = None  # the RQ queue the job came from


def _stamps_of(envelope: JobEnvelope, job_id: str) -> _Stamps:
    return _Stamps(job_id, envelope.enqueued_at, envelope.deadline_at)


def _stamps_of_invalid(payload: Any, job_id: str, origin: str | None) -> _Stamps:
    """Stamps read leniently from a payload that is not a valid envelope (its deadline: now)."""
    now = time.time()
    data = payload if isinstance(payload, dict) else {}
    try:
        enqueued = epoch_field(data, "enqueued_at")
    except InvalidRequest:
        enqueued = now
    return _Stamps(job_id, enqueued, now, data.get("request"), origin)


def _valid_or_none(value: Any, pattern: re.Pattern[str]) -> str | None:
    """An id copied from an invalid request only when it is well formed."""
    return value if isinstance(value, str) and len(value) <= 256 and pattern.fullmatch(value) else None


def _safe_text(text: str | None, limit: int = 1000) -> str | None:
    """Text that always encodes (input may carry lone surrogates), cut to ``limit``."""
    if text is None:
        return None
    return text.encode("utf-8", "replace").decode("utf-8")[:limit]


def _result(ctx: WorkerContext, env: _Stamps, request: RetrievalRequest | None, status: str,
            started_at: float, trace_id: str, **fields: Any) -> RetrievalResult:
    raw = env.raw_request if isinstance(env.raw_request, dict) else {}
    return RetrievalResult.model_construct(  # every field is built here, from validated input
        job_id=env.job_id,
        request_id=request.request_id if request else _valid_or_none(raw.get("request_id"), REQUEST_ID_PATTERN),
        namespace=request.namespace if request else (_valid_or_none(raw.get("namespace"), NAMESPACE_PATTERN) or "?"),
        queue=request.queue if request else (env.origin or "?"),
        status=status,  # type: ignore[arg-type]
        timestamps=Timestamps.model_construct(enqueued_at=env.enqueued_at, deadline_at=env.deadline_at,
                              started_at=started_at, finished_at=time.time()),
        trace_id=trace_id,
        worker=ctx.name,
        **{**fields, "error": _safe_text(fields.get("error"))},
    )


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


def _cached(ctx: WorkerContext, env: JobEnvelope, request: RetrievalRequest,
            tracer: SpanCollector) -> tuple[str | None, float, _Outcome | None]:
    """The cache key for this request, the look-up's milliseconds, and the cached outcome if any."""
    if not ctx.settings.cache.enabled:
        return None, 0.0, None
    with tracer.span("cache") as span:
        version = env.memory_version
        if version is None:
            version = ctx.backends.version(request.namespace)
        key = cache_key(request, ctx.settings.backend.kind, version)
        raw = ctx.client.get(key)
        span.set(hit=raw is not None)
    looked_up_ms = round(span.duration_ms, 3)
    if raw is None:
        return key, looked_up_ms, None
    results, context, stats = read_entry(raw, looked_up_ms)
    return key, looked_up_ms, _Outcome("ok", results, context, stats=stats)


def _run(ctx: WorkerContext, env: JobEnvelope, job_id: str, tracer: SpanCollector, started_at: float) -> _Outcome:
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
            backend = ctx.backends.for_namespace(request.namespace, env.memory_version)
            outcome = run_pipeline(
                request.query, backend, ctx.settings.pipeline, filters=request.filters, budget=budget,
                tracer=tracer, max_results=request.options.max_results,
                record_query=ctx.settings.service.record_query_text,
                use_remote_classifier=ctx.settings.backend.nous.use_remote_classifier,
                reranking=Reranking(ctx.settings.rerank, ctx.scorer), rerank=request.options.rerank,
            )
            span.set(partial=outcome.partial)
    except BackendError as exc:
        logger.warning("job=%s stage=search backend failed: %s", job_id, exc)
        return _Outcome("failed", error=str(exc), stats=JobStats(backend_calls=exc.calls))
    status = "partial" if outcome.partial or budget.expired() else "ok"
    stats = JobStats.model_validate(outcome.stats.to_dict())
    if key is not None:
        stats = stats.with_(cache_hit=False, stage_ms={"cache": looked_up_ms, **(stats.stage_ms or {})})
    done = _Outcome(status, result_items(outcome.hits, outcome.sub_queries), outcome.context, stats=stats)
    if key is not None and cacheable(status, stats):
        done.cache = (key, cache_entry(done.results, done.context, stats), ctx.settings.cache.ttl_seconds)
    return done


def _refuse(ctx: WorkerContext, env: _Stamps, started_at: float, trace_id: str, reason: str,
            message: str) -> RetrievalResult:
    """The ``failed`` result of a payload that is not run; nothing of the
    payload is echoed but what the request's own validation let through."""
    result = _result(ctx, env, None, "failed", started_at, trace_id, error=message, stats=JobStats(refused=reason))
    ctx.results.write(result, None)
    logger.warning("job=%s status=failed refused (%s): %s", env.job_id, reason, message)
    return result


def refused_result(ctx: WorkerContext, job_id: str, queue: str, reason: str, message: str) -> RetrievalResult:
    """Write (once) the ``failed`` result of a queue entry the worker refused to run."""
    env = _stamps_of_invalid(None, job_id, queue)
    _refuse(ctx, env, time.time(), "0" * 32, reason, f"refused queue entry: {message}")
    return ctx.results.read(job_id) or _result(ctx, env, None, "failed", time.time(), "0" * 32, error=message)


def execute(ctx: WorkerContext, payload: Any, job_id: str, origin: str | None = None) -> RetrievalResult:
    """Run one job payload to its single final result (and store it)."""
    started_at, started_ns = time.time(), time.time_ns()
    tracer = SpanCollector(max_spans=ctx.settings.limits.max_trace_spans)
    try:
        env = JobEnvelope.parse(payload, ctx.settings.limits)
    except InvalidRequest as exc:
        stamps = _stamps_of_invalid(payload, job_id, origin)
        result = _result(ctx, stamps, None, "failed", started_at, tracer.trace_id, error=f"invalid request: {exc}")
        ctx.results.write(result, None)
        logger.info("job=%s status=failed invalid request: %s", job_id, exc)
        return result
    request = env.request
    if env.trace_id:
        tracer.trace_id = env.trace_id
    if not binds(job_id, request.namespace, request.request_id):
        return _refuse(ctx, _stamps_of_invalid(None, job_id, origin), started_at, "0" * 32, "tenant_mismatch",
                       "job id does not belong to the request's namespace and request id; not run")
    with tracer.span("job", queue=request.queue, namespace=request.namespace) as root:
        tracer.root_span_id = root.span_id
        root.start_time_unix_nano = min(started_ns, int(env.enqueued_at * 1e9))
        _queue_wait_span(tracer, env, started_ns)
        try:
            outcome = _run(ctx, env, job_id, tracer, started_at)
        except JobTimeoutException:
            outcome = _Outcome("failed", error="hard timeout: a stage hung past the job's deadline")
        except Exception as exc:  # unexpected: still one final result, with the trace naming the stage
            logger.exception("job=%s unexpected failure", job_id)
            outcome = _Outcome("failed", error=f"internal error: {type(exc).__name__}: {exc}")
        fields: dict[str, Any] = {
            "error": outcome.error, "stats": outcome.stats, "results": outcome.results,
            "context": outcome.context if request.options.format == "text" else "",
        }
        with tracer.span("result_write"):
            result = _result(ctx, _stamps_of(env, job_id), request, outcome.status, started_at, tracer.trace_id,
                             **fields)
            result = fit_result(result, ctx.settings.limits.max_result_bytes)
        root.set(status=outcome.status)
    result = _write_with_trace(ctx, result, tracer, outcome.cache)
    took = (time.time() - started_at) * 1000
    logger.info("job=%s status=%s results=%d took_ms=%.1f", job_id, result.status, len(result.results), took)
    return result


def _write_with_trace(ctx: WorkerContext, result: RetrievalResult, tracer: SpanCollector,
                     cache: tuple[str, bytes, int] | None) -> RetrievalResult:
    """Write the result and its trace. A trace id is one job's: when the
    payload named one another job's trace already holds, the trace (and the
    result's pointer to it) move to a fresh id instead of overwriting it."""
    for _ in range(3):
        trace = {"trace_id": tracer.trace_id, "job_id": result.job_id,
                 "spans": [s.to_dict() for s in tracer.spans], "dropped_spans": tracer.dropped}
        if ctx.results.write(result, trace, cache) is not WriteOutcome.TRACE_TAKEN:
            return result
        logger.warning("job=%s trace id %s belongs to another job; using a new one", result.job_id, tracer.trace_id)
        tracer.trace_id = new_trace_id()
        for span in tracer.spans:
            span.trace_id = tracer.trace_id
        result = result.model_copy(update={"trace_id": tracer.trace_id})
    raise FerretError(f"job={result.job_id}: no free trace id after 3 tries")


def request_of(payload: Any, limits: LimitSettings) -> RetrievalRequest | None:
    """The request a payload carries, or None when it is not a valid envelope."""
    try:
        return JobEnvelope.parse(payload, limits).request
    except InvalidRequest:
        return None


def lost_result(ctx: WorkerContext, payload: Any, job_id: str, origin: str | None, reason: str) -> RetrievalResult:
    """Write (once) the ``failed`` result of a job whose worker died under it."""
    env = _stamps_of_invalid(payload, job_id, origin)
    raw = env.raw_request if isinstance(env.raw_request, dict) else {}
    try:
        request = parse_request(raw, ctx.settings.limits)
    except InvalidRequest:
        request = None
    deadline = deadline_of(payload)
    if deadline is not None:
        env.deadline_at = deadline
    result = _result(ctx, env, request, "failed", time.time(), "0" * 32, error=reason)
    ctx.results.write(result, None)
    return ctx.results.read(job_id) or result


def run_retrieval(payload: Any) -> dict[str, Any]:
    """RQ entry point. Returns a small JSON-able summary; the result is in Redis."""
    job = get_current_job()
    job_id = job.id if job else str(payload.get("job_id", "local")) if isinstance(payload, dict) else "local"
    ctx = _get_context(job.connection if job else None)
    try:
        result = execute(ctx, payload, job_id, job.origin if job else None)
    except Exception as exc:  # last line of defence (the result write itself failed): still one final result
        logger.exception("job=%s unexpected failure", job_id)
        env = _stamps_of_invalid(payload, job_id, job.origin if job else None)
        error = f"internal error: {type(exc).__name__}: {exc}"
        result = _result(ctx, env, None, "failed", time.time(), "0" * 32, error=error)
        ctx.results.write(result, None)
    _finished.clear()  # at most one: the worker's main loop takes it right after
    _finished[job_id] = result
    return {"status": result.status, "results": len(result.results)}
