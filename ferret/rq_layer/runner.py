"""Build and run an RQ worker serving Ferret's queues, prefetch before batch: its class
(``worker_classes``), its resources and observers, the store it must share with the queue's other
workers, its metrics server, and one line when it starts and one when it stops."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from typing import Any

import redis
from prometheus_client import start_http_server
from rq import Queue, Worker
from rq.exceptions import StopRequested
from rq.serializers import JSONSerializer

from ferret.contract import QUEUES
from ferret.errors import ConfigError
from ferret.key_migration import tag_store_keys
from ferret.redis_plumbing.redis_conn import redacted, url_of
from ferret.redis_plumbing.store_conn import FULL_COVERAGE_WARNING, full_coverage_required
from ferret.repeated_lines import say_everything_held_back
from ferret.rq_layer.bounded_job import bounded_job_class
from ferret.rq_layer.cheap_helpers import use_cheap_helpers
from ferret.rq_layer.clock import use_clock
from ferret.rq_layer.gc_pacing import freeze_start_up
from ferret.rq_layer.intake import Refusal, guarded_queue_class, mark_failed
from ferret.rq_layer.worker_classes import CLASSES, WORKER_CLASSES
from ferret.settings import Settings
from ferret.worker.backends.tantivy_index import limit_malloc_arenas
from ferret.worker.co_retrieval.applier import co_retrieval_amount
from ferret.worker.co_retrieval.wiring import co_retrieval_applier
from ferret.worker.core.report import JobReport, Observer
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.core.results import record_refusal
from ferret.worker.core.store_binding import check_store_binding
from ferret.worker.metrics import FerretMetrics

logger = logging.getLogger(__name__)

# How often a forking worker's parent heart-beats while its work horse runs.
JOB_MONITORING_SECONDS = 5



def _refused(context: WorkerResources, metrics: FerretMetrics, refusal: Refusal) -> None:
    """A queue entry the worker will not run: counted; RQ's failed registry
    (when its hash was read) and the refusal log (when it names a usable job
    id). No result is written under the id: an entry anyone can write must
    not decide the answer of the request that id belongs to."""
    metrics.refused.labels(refusal.reason).inc()
    if refusal.job_id is None:
        return
    # The log first: whoever sees the job failed can read why.
    record_refusal(context, refusal.job_id, refusal.queue, refusal.reason, refusal.message)
    if refusal.job is not None:
        queue = Queue(refusal.queue, connection=context.client, serializer=JSONSerializer)
        mark_failed(refusal.job, queue, f"refused by Ferret: {refusal.message}")


def stop_reason(worker: Any, burst: bool, max_jobs: int | None, max_idle_time: int | None) -> str:
    """Why RQ's loop returned, in the words of the option or signal that made it."""
    signum = getattr(worker, "ferret_stop_signal", None)
    if signum is not None:
        return f"{signal.Signals(signum).name}: the job in hand, if any, finished first"
    if max_jobs is not None and getattr(worker, "ferret_rq_jobs_taken", 0) >= max_jobs:
        return f"--max-jobs {max_jobs} reached"
    if burst:
        return "--burst: the queues are empty"
    if max_idle_time is not None:
        return f"--max-idle-time: nothing to do for {max_idle_time} s"
    return "RQ's loop ended"


def log_finished(report: JobReport) -> None:
    """One INFO line per finished job (no query text: that stays in the trace)."""
    result = report.result
    times = result.timestamps
    took = f" in {(times.finished_at - times.started_at) * 1000:.1f} ms" \
        if times.finished_at is not None and times.started_at is not None else ""
    error = f": {result.error}" if result.error else ""
    logger.info("job %s on %s (namespace %s): %s%s, %d result(s)%s", result.job_id, result.queue,
                result.namespace, result.status, took, len(result.results), error)


def _observers(context: WorkerResources, metrics: FerretMetrics, worker_name: str | None) -> list[Observer]:
    """What hears of every finished job: metrics, the log line, the spans to
    OTLP when configured, and co-retrieval strengthening when on."""
    backend, settings = context.settings.backend.kind, context.settings.co_retrieval

    def record_metrics(report: JobReport) -> None:
        metrics.record(report.result, backend)
        if report.folded_after:
            metrics.record_fold("after_job", report.folded_after, report.fold_after_ms, report.folds_taken_after)

    observers: list[Observer] = [record_metrics, log_finished]
    if context.settings.tracing.otlp_endpoint:
        from ferret.worker.span_export import SpanExport

        observers.append(SpanExport(context.settings.tracing, worker_name))
    if settings.enabled:
        applier = co_retrieval_applier(context, metrics)

        def strengthen(report: JobReport) -> None:
            applier.submit(report.result, co_retrieval_amount(settings, report.request))

        observers.append(strengthen)
    return observers


def build_worker(client: redis.Redis, settings: Settings, queues: Sequence[str] = QUEUES,
                 worker_class: str | None = None, name: str | None = None,
                 metrics: FerretMetrics | None = None) -> Worker:
    unknown = [q for q in queues if q not in QUEUES]
    if unknown:
        raise ConfigError(f"unknown queue(s) {', '.join(unknown)}; use {', '.join(QUEUES)}")
    ordered = [q for q in QUEUES if q in queues]  # prefetch is always served first
    kind = worker_class or settings.service.worker_class
    lean = settings.service.lean_bookkeeping
    cls = CLASSES.get((kind, lean))
    if cls is None:
        raise ConfigError(f"unknown worker class {kind!r}; use {', '.join(WORKER_CLASSES)}")
    context = build_resources(settings, client)
    identity, holds = check_store_binding(settings, client, context.memory_store)  # one store for the queue's workers
    if full_coverage_required(context.memory_store):
        logger.warning(FULL_COVERAGE_WARNING)
    tag_store_keys(context.memory_store)  # once per store: keys written before their hash tags
    if context.clock is not None:
        context.clock.time()  # a first reading of Redis's clock, which RQ's stamps then follow
        use_clock(context.clock)  # RQ's heartbeats and registry scores on Redis's clock too
    use_cheap_helpers()  # RQ's stamp parser and serializer look-up, at a fraction of their cost a job
    metrics = metrics or FerretMetrics()
    observers = _observers(context, metrics, name)

    def on_refused(refusal: Refusal) -> None:
        _refused(context, metrics, refusal)

    queue_class = guarded_queue_class(on_refused, lean)
    job_class = bounded_job_class(settings.limits.job_data_cap())  # a job's data inflated under a cap
    worker = cls(
        [queue_class(q, connection=client, serializer=JSONSerializer, job_class=job_class) for q in ordered],
        connection=client, serializer=JSONSerializer, name=name, queue_class=queue_class,
        job_class=job_class,
        worker_ttl=settings.service.worker_ttl_seconds, job_monitoring_interval=JOB_MONITORING_SECONDS,
        maintenance_interval=settings.service.maintenance_interval_seconds,
    )
    worker.ferret_on_refused = on_refused  # type: ignore[attr-defined]
    worker.ferret_jobs_per_trip = settings.service.jobs_per_trip  # type: ignore[attr-defined]
    worker.ferret_jobs_per_horse = settings.service.jobs_per_horse  # type: ignore[attr-defined]
    worker.ferret_metrics = metrics  # type: ignore[attr-defined]
    worker.ferret_context = context  # type: ignore[attr-defined]
    worker.ferret_store_identity = identity  # type: ignore[attr-defined]
    worker.ferret_store_holds = holds  # type: ignore[attr-defined]
    worker.ferret_observers = observers  # type: ignore[attr-defined]
    return worker


def run_worker(client: redis.Redis, settings: Settings, queues: Sequence[str] = QUEUES,
               burst: bool = False, worker_class: str | None = None, log_level: str = "WARNING",
               metrics_port: int | None = None, metrics_host: str = "127.0.0.1", name: str | None = None,
               max_jobs: int | None = None, max_idle_time: int | None = None,
               rq_log_level: str | None = None) -> bool:
    """Serve ``queues`` until stopped. ``log_level`` is Ferret's (its INFO: a
    line on start and one per finished job); ``rq_log_level`` is RQ's own
    (default the same)."""
    limit_malloc_arenas()
    metrics = FerretMetrics()
    worker = build_worker(client, settings, queues, worker_class, name=name, metrics=metrics)
    if metrics_port is not None:
        metrics.watch_queues(client, worker.ferret_context.now)  # type: ignore[attr-defined]
        health = worker.ferret_context.health  # type: ignore[attr-defined]
        if health is not None:
            metrics.watch_endpoints(health)
        index_root = worker.ferret_context.index_root  # type: ignore[attr-defined]
        if index_root is not None:
            metrics.watch_indexes(index_root)
        start_http_server(metrics_port, addr=metrics_host, registry=metrics.registry)
        logger.info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    # Start-up objects (modules, indexes' code, RQ) never die: keep them out of
    # the collector's sweeps, which otherwise cost every job (measured ~7%); what comes to stay later is
    # frozen between jobs (ferret.rq_layer.gc_pacing).
    freeze_start_up()
    # RQ registers the worker before it installs its signal handlers: a SIGTERM in between would
    # end the process unannounced (StopHandling.request_stop_early).
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, worker.request_stop_early)  # type: ignore[attr-defined]
    logger.info("Listening on %s at %s (worker %s, %s, pid %d)", ", ".join(q.name for q in worker.queues),
                redacted(url_of(client)), worker.name, type(worker).__name__, os.getpid())
    reason = "stopped by an error (see above)"
    try:
        try:
            worked = bool(worker.work(burst=burst, logging_level=rq_log_level or log_level, with_scheduler=False,
                                      max_jobs=max_jobs, max_idle_time=max_idle_time))
        except StopRequested:  # a signal after RQ's handlers, before its loop: a stop all the same
            worked = False
        reason = stop_reason(worker, burst, max_jobs, max_idle_time)
        refused = getattr(worker, "ferret_refused", None)
        if refused is not None:
            reason = "its memory store is not the queue's"
            raise refused
        return worked
    finally:
        say_everything_held_back()
        logger.info("worker %s stopped (%s) after %d job(s)", worker.name, reason,
                    getattr(worker, "ferret_jobs_taken", 0))
        for observer in worker.ferret_observers:  # type: ignore[attr-defined]
            shutdown = getattr(observer, "shutdown", None)
            if shutdown is not None:
                shutdown()  # queued spans go out before the worker exits
