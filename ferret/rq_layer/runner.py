"""Start an RQ worker serving Ferret's queues, prefetch before batch.

The worker class is RQ's ``SimpleWorker`` by default: it runs jobs in the
worker process, which on this machine saves about 7.5 ms a job over the
forking ``Worker`` and keeps the per-process index cache and HTTP pool warm.
``fork`` is available for isolation (a crashing job cannot take the worker
with it); the job adapter rebuilds its context in the forked child.

Both classes are wrapped so that metrics are recorded in the main process
after each job (see ``ferret.worker.metrics``), and served on ``--metrics-port``.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from prometheus_client import start_http_server
from rq import Queue, SimpleWorker, Worker, worker_registration
from rq.exceptions import StopRequested
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer
from rq.worker import WorkerStatus

from ferret.contract import QUEUES
from ferret.errors import ConfigError, JobRefused
from ferret.key_migration import tag_store_keys
from ferret.redis_plumbing.redis_conn import redacted, url_of
from ferret.rq_layer.bookkeeping import CoalescedBookkeeping, OneTripJobStart
from ferret.rq_layer.bounded_job import bounded_job_class
from ferret.rq_layer.clock import rq_now as utc_now
from ferret.rq_layer.clock import use_clock
from ferret.rq_layer.entry import report_of
from ferret.rq_layer.intake import Refusal, guarded_queue_class, mark_failed
from ferret.rq_layer.maintenance import sweep
from ferret.rq_layer.reaper import reap
from ferret.settings import Settings
from ferret.worker.backends.tantivy_index import limit_malloc_arenas
from ferret.worker.co_retrieval.applier import co_retrieval_amount
from ferret.worker.co_retrieval.wiring import co_retrieval_applier
from ferret.worker.core.report import JobReport, Observer, after_job
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.core.results import lost_result, record_refusal, refused_reason, request_of
from ferret.worker.metrics import FerretMetrics

logger = logging.getLogger(__name__)

# How often a forking worker's parent heart-beats while its work horse runs.
JOB_MONITORING_SECONDS = 5


REGISTRATION_CHECK_SECONDS = 5.0


class _Observed:
    """Mixin: busy/idle, metrics after each job, and the reaper for lost jobs."""

    ferret_metrics: FerretMetrics
    ferret_context: WorkerResources
    ferret_observers: list[Observer]
    ferret_on_refused: Callable[[Refusal], None]
    last_cleaned_at: Any
    _ferret_last_reap = 0.0
    _ferret_registration_checked = 0.0
    ferret_stop_signal: int | None = None  # the signal that asked this worker to stop, if one did
    ferret_jobs_taken = 0  # jobs this worker ran (to a result, or cut short)
    _state: str

    def request_stop(self, signum: int, frame: Any) -> None:
        if self.ferret_stop_signal is None:
            self.ferret_stop_signal = signum
        super().request_stop(signum, frame)  # type: ignore[misc]

    @contextmanager
    def _redis_may_be_away(self, what: str) -> Iterator[None]:
        """RQ's main loop quits on a Redis error anywhere but in its dequeue (which waits
        and retries): around RQ's other calls, a Redis out of reach past the clients'
        retries is logged and the loop goes on to the dequeue, which waits for it."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            logger.warning("worker %s: Redis out of reach during %s (%s); carrying on",
                           self.name, what, exc)  # type: ignore[attr-defined]

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # part of a transaction: its caller sends it and sees any error
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]
            return
        with self._redis_may_be_away("a heartbeat"):
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]

    def check_for_suspension(self, burst: bool) -> None:
        with self._redis_may_be_away("the suspension check"):
            super().check_for_suspension(burst)  # type: ignore[misc]

    def _register_again(self) -> None:
        """The worker's registration, again if it is gone. Cut off from Redis for longer than
        its TTL (a job's heartbeat TTL is ``worker_ttl``, 16 s), a worker's key expires and the
        other workers' maintenance drops it from the worker registry: RQ would go on serving
        without it, invisible to ``rq info`` and to the reaper, which then takes every job it
        starts for a lost one."""
        if self.birth_date is None:  # type: ignore[attr-defined]
            return  # not registered yet: RQ does it when the worker starts
        key: str = self.key  # type: ignore[attr-defined]
        connection = self.connection  # type: ignore[attr-defined]
        with connection.pipeline(transaction=False) as pipe:
            pipe.hexists(key, "birth")
            pipe.sismember(self.redis_workers_keys, key)  # type: ignore[attr-defined]
            if all(pipe.execute()):
                return  # the key outlived the outage
        with connection.pipeline() as pipe:
            pipe.hset(key, mapping=self.serialize())  # type: ignore[attr-defined]
            worker_registration.register(self, pipe)  # type: ignore[arg-type]
            pipe.expire(key, self.worker_ttl + 60)  # type: ignore[attr-defined]
            pipe.execute()
        logger.warning("worker %s: Redis is back after its key expired; registered again",
                       self.name)  # type: ignore[attr-defined]

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        """Short, so a killed worker is noticed within seconds (see ferret.rq_layer.reaper)."""
        ttl: int = self.worker_ttl  # type: ignore[attr-defined]
        if job.timeout and job.timeout > 0:
            return min(ttl, int(job.timeout) + 1)
        return ttl

    @property
    def should_run_maintenance_tasks(self) -> bool:
        interval = self.ferret_context.settings.service.reaper_interval_seconds
        return bool(super().should_run_maintenance_tasks  # type: ignore[misc]
                    or time.monotonic() - self._ferret_last_reap >= interval)

    def run_maintenance_tasks(self) -> None:
        """RQ's registry maintenance at its interval (Ferret's safe version,
        see ``ferret.rq_layer.maintenance``; Ferret runs no scheduler and no groups),
        and the reaper at Ferret's; every few seconds, the worker's own registration."""
        with self._redis_may_be_away("maintenance"):
            if time.monotonic() - self._ferret_registration_checked >= REGISTRATION_CHECK_SECONDS:
                self._register_again()
                self._ferret_registration_checked = time.monotonic()
            if super().should_run_maintenance_tasks:  # type: ignore[misc]
                self.clean_registries()
        self._ferret_last_reap = time.monotonic()
        try:
            for result in reap(self.ferret_context, self.queues,  # type: ignore[attr-defined]
                               on_refused=self.ferret_on_refused):
                after_job(self.ferret_observers, JobReport(result, None))
        except StopRequested:  # SIGTERM at an idle worker: RQ's way to stop, not a failure
            raise
        except Exception:
            logger.exception("reaper pass failed")

    def clean_registries(self) -> None:
        for queue in self.queues:  # type: ignore[attr-defined]
            if queue.acquire_maintenance_lock():
                try:
                    for result in sweep(queue, self.ferret_context, self.ferret_on_refused, self.ferret_context.now()):
                        after_job(self.ferret_observers, JobReport(result, None))
                finally:
                    queue.release_maintenance_lock()
        self.last_cleaned_at = utc_now()

    def execute_job(self, job: Job, queue: Queue) -> Any:
        job.ferret_resources = self.ferret_context  # type: ignore[attr-defined]  # what the job runs with
        self.ferret_metrics.busy.set(1)
        # Busy from here, in the eyes of RQ's signal handler: a SIGTERM between taking the job and its start
        # transaction is then a warm shut-down (this job runs, then the worker stops), not an exception that
        # would cut the start transaction in the middle.
        self._state = WorkerStatus.BUSY
        stopped_before_its_end = cut_off = False
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        except StopRequested:
            stopped_before_its_end = not self.ferret_context.results.exists(job.id)
            if stopped_before_its_end:
                self._put_back_if_not_started(job, queue)
            raise
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            # Redis out of reach past the clients' retries while RQ started or ended the job: the worker
            # goes on (RQ's loop waits for Redis); the job is the reaper's, like a dead worker's.
            cut_off = True
            logger.error("job=%s: Redis out of reach while the worker started or ended it (%s); the worker "
                         "carries on, and the job is re-run or ended by the reaper", job.id, exc)
            return None
        finally:
            self.ferret_metrics.busy.set(0)
            if not stopped_before_its_end and not cut_off:
                with self._stop_deferred():
                    self._record(job)

    def _put_back_if_not_started(self, job: Job, queue: Queue) -> None:
        """A stop that still reaches a job before its start (StopRequested
        raised there) must not end it: it goes back to the front of its
        queue, for this worker's successor. One whose start went through is
        the reaper's (its worker is gone: it runs again)."""
        try:
            if job.get_status(refresh=True) != JobStatus.QUEUED:
                return
            with self.ferret_context.client.pipeline() as pipeline:
                pipeline.lrem(queue.intermediate_queue_key, 1, job.id)
                pipeline.lpush(queue.key, job.id)
                pipeline.execute()
        except Exception:  # the intermediate-queue sweep is the last resort
            logger.exception("job=%s stopped before it started and could not be put back", job.id)
            return
        logger.warning("job=%s stopped before it started; back on %s", job.id, queue.name)

    @contextmanager
    def _stop_deferred(self) -> Iterator[None]:
        """Count the after-job recording as part of the job: RQ's handler
        raises StopRequested at an idle worker, which an observer's
        ``except Exception`` would swallow (the worker would keep serving);
        at a busy one it asks the loop to stop after the job."""
        state = self._state
        self._state = WorkerStatus.BUSY
        try:
            yield
        finally:
            self._state = state

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """A refused payload (``JobRefused``) is one warning line, already logged where it was
        refused, not RQ's traceback at ERROR; RQ still records the job as failed."""
        if exc_info and isinstance(exc_info[1], JobRefused):
            return
        super().handle_exception(job, *exc_info)  # type: ignore[misc]

    def _record(self, job: Job) -> None:
        self.ferret_jobs_taken += 1
        try:
            report = report_of(job) or self._stored_report(job)
        except Exception:
            logger.exception("job=%s cannot read or write the result for its observers", job.id)
            return
        if report is not None and not report.dropped:  # a dropped late result was logged as dropped
            after_job(self.ferret_observers, report)

    def _stored_report(self, job: Job) -> JobReport | None:
        """The report of a job this process did not leave one for: a forked work horse's, read back
        from Redis; a horse that died wrote none (it is written now); a refused payload has none
        (counted here)."""
        payload = job.args[0] if job.args else None
        result = self.ferret_context.results.read(job.id)
        if result is None:
            refused = refused_reason(job)
            if refused is not None:
                self.ferret_metrics.refused.labels(refused).inc()
                return None
            result = lost_result(self.ferret_context, payload, job.id, job.origin,
                                 "work horse died while running the job")
            if result is None:  # its payload names another tenant's id: refused, nothing written
                return None
        trace = self.ferret_context.results.trace(result.trace_id) \
            if result.trace_id and self.ferret_context.settings.tracing.otlp_endpoint else None
        return JobReport(result, request_of(payload, self.ferret_context.settings.limits), trace)


class ObservedSimpleWorker(_Observed, OneTripJobStart, CoalescedBookkeeping, SimpleWorker):
    pass


class ObservedForkWorker(_Observed, CoalescedBookkeeping, Worker):
    pass


class StockSimpleWorker(_Observed, SimpleWorker):
    """RQ's own bookkeeping, every write it makes (``service.lean_bookkeeping: false``)."""


class StockForkWorker(_Observed, Worker):
    """RQ's own bookkeeping, every write it makes (``service.lean_bookkeeping: false``)."""


_CLASSES: dict[tuple[str, bool], type[Worker]] = {  # (name, lean bookkeeping) -> Ferret's class
    ("simple", True): ObservedSimpleWorker,  # type: ignore[dict-item]
    ("fork", True): ObservedForkWorker,
    ("simple", False): StockSimpleWorker,  # type: ignore[dict-item]
    ("fork", False): StockForkWorker,
}
WORKER_CLASSES = tuple(dict.fromkeys(name for name, _ in _CLASSES))  # the names users give


def _refused(context: WorkerResources, metrics: FerretMetrics, refusal: Refusal) -> None:
    """A queue entry the worker will not run: counted; RQ's failed registry
    (when its hash was read) and the refusal log (when it names a usable job
    id). No result is written under the id: an entry anyone can write must
    not decide the answer of the request that id belongs to."""
    metrics.refused.labels(refusal.reason).inc()
    if refusal.job_id is None:
        return
    if refusal.job is not None:
        queue = Queue(refusal.queue, connection=context.client, serializer=JSONSerializer)
        mark_failed(refusal.job, queue, f"refused by Ferret: {refusal.message}")
    record_refusal(context, refusal.job_id, refusal.queue, refusal.reason, refusal.message)


def stop_reason(worker: Any, burst: bool, max_jobs: int | None, max_idle_time: int | None) -> str:
    """Why RQ's loop returned, in the words of the option or signal that made it."""
    signum = getattr(worker, "ferret_stop_signal", None)
    if signum is not None:
        return f"{signal.Signals(signum).name}: the job in hand, if any, finished first"
    if max_jobs is not None and getattr(worker, "ferret_jobs_taken", 0) >= max_jobs:
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
            metrics.record_fold("after_job", report.folded_after, report.fold_after_ms)

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
    cls = _CLASSES.get((kind, lean))
    if cls is None:
        raise ConfigError(f"unknown worker class {kind!r}; use {', '.join(WORKER_CLASSES)}")
    context = build_resources(settings, client)
    tag_store_keys(context.memory_store)  # once per store: keys written before their hash tags
    if context.clock is not None:
        use_clock(context.clock)  # RQ's heartbeats and registry scores on Redis's clock too
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
    worker.ferret_metrics = metrics  # type: ignore[attr-defined]
    worker.ferret_context = context  # type: ignore[attr-defined]
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
    # the collector's sweeps, which otherwise cost every job (measured ~7%).
    gc.collect()
    gc.freeze()
    # RQ registers the worker before it installs its signal handlers: a SIGTERM in between would
    # end the process unannounced. Until RQ's handlers replace these, a signal is noted as a stop
    # request, which RQ's loop honours at its first turn (RQ's own handler would raise here,
    # outside the loop that catches it).
    def stop_early(signum: int, _frame: Any) -> None:
        if getattr(worker, "ferret_stop_signal", None) is None:
            worker.ferret_stop_signal = signum  # type: ignore[attr-defined]
        worker._stop_requested = True

    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, stop_early)
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
        return worked
    finally:
        logger.info("worker %s stopped (%s) after %d job(s)", worker.name, reason,
                    getattr(worker, "ferret_jobs_taken", 0))
        for observer in worker.ferret_observers:  # type: ignore[attr-defined]
            shutdown = getattr(observer, "shutdown", None)
            if shutdown is not None:
                shutdown()  # queued spans go out before the worker exits
