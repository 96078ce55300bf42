"""Ferret's RQ worker classes: RQ's own, observed (metrics and observers after each job, the reaper and
Ferret's registry maintenance), tolerant of Redis going away, stopping cleanly.

The worker class is RQ's ``SimpleWorker`` by default: it runs jobs in the
worker process, which on this machine saves about 7.5 ms a job over the
forking ``Worker`` and keeps the per-process index cache and HTTP pool warm.
``fork`` is available for isolation (a crashing job cannot take the worker
with it); the job adapter rebuilds its context in the forked child.

Both classes are wrapped so that metrics are recorded in the main process
after each job (see ``ferret.worker.metrics``), and served on ``--metrics-port``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis
from rq import Queue, SimpleWorker, Worker
from rq.exceptions import StopRequested
from rq.job import Job
from rq.worker import WorkerStatus

from ferret.carriers import NotACarrier, is_carrier, members_of
from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.errors import ConfigError, JobRefused
from ferret.redis_plumbing.redis_conn import REDIS_AWAY
from ferret.repeated_lines import RepeatedLines
from ferret.rq_layer.bookkeeping import CoalescedBookkeeping, OneTripJobStart
from ferret.rq_layer.clock import rq_now as utc_now
from ferret.rq_layer.entry import report_of, reports_of
from ferret.rq_layer.gc_pacing import between_jobs
from ferret.rq_layer.intake import Refusal
from ferret.rq_layer.job_pulse import JobPulse
from ferret.rq_layer.kept_horse import KeptHorse
from ferret.rq_layer.maintenance import sweep
from ferret.rq_layer.reaper import reap
from ferret.rq_layer.trip_batching import JobsPerTrip
from ferret.rq_layer.worker_away import REGISTRATION_CHECK_SECONDS, RedisAwayTolerant
from ferret.rq_layer.worker_stops import StopHandling
from ferret.worker.core.report import JobReport, Observer, after_job
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import finished, lost_result, refused_reason, request_of
from ferret.worker.core.store_binding import renew_binding
from ferret.worker.metrics import FerretMetrics

logger = logging.getLogger(__name__)
_AWAY = RepeatedLines(logger)


class _Observed(StopHandling, RedisAwayTolerant):
    """Mixin: busy/idle, metrics after each job, and the reaper for lost jobs."""

    ferret_metrics: FerretMetrics
    ferret_context: WorkerResources
    ferret_observers: list[Observer]
    ferret_on_refused: Callable[[Refusal], None]
    ferret_store_identity: str
    ferret_store_holds = True  # whether this worker's store held memories when it started
    ferret_refused: Exception | None = None  # why the worker stopped on its own, when it did (its exit's)
    last_cleaned_at: Any
    _ferret_last_reap = 0.0
    _ferret_registration_checked = 0.0
    ferret_jobs_taken = 0  # jobs this worker ran (to a result, or cut short); a carrier's each of its lines
    ferret_rq_jobs_taken = 0  # RQ jobs (a carrier is one), as RQ's --max-jobs counts them
    _ferret_pulse: JobPulse | None = None
    _state: str

    @property
    def ferret_pulse(self) -> JobPulse:
        if self._ferret_pulse is None:
            self._ferret_pulse = JobPulse(self)
        return self._ferret_pulse

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        """The fork happens while no heart-beat is in flight (``ferret.rq_layer.job_pulse``)."""
        with self.ferret_pulse.paused():
            super().fork_work_horse(job, queue)  # type: ignore[misc]

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
            try:
                renew_binding(self.ferret_context.settings, self.ferret_context.client, self.ferret_store_identity,
                              self.ferret_store_holds)
            except ConfigError as exc:  # another store took the queue: this worker stops, and says why
                logger.error("worker %s: %s", self.name, exc)  # type: ignore[attr-defined]
                self.ferret_refused = exc
                raise StopRequested() from exc  # RQ's way to stop an idle worker (its loop ends on it)
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
        except REDIS_AWAY as exc:  # a known condition: one line (and a count), not a traceback
            _AWAY.warning("reaper passes skipped: Redis out of reach", "reaper pass skipped: Redis out of reach (%s)",
                          exc)
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
        grace = self.ferret_context.settings.service.hard_timeout_grace_seconds
        self.ferret_job_ends_by = time.monotonic() + float(job.timeout or 0) + grace  # for a stop's watchdog
        stopped_before_its_end = cut_off = False
        try:
            with self.ferret_pulse.beating(job, self.get_heartbeat_ttl(job)):
                return super().execute_job(job, queue)  # type: ignore[misc]
        except StopRequested:
            stopped_before_its_end = not finished(self.ferret_context, job.id, _payload(job))
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
            between_jobs()

    def handle_exception(self, job: Job, *exc_info: Any) -> None:
        """A refused payload (``JobRefused``) is one warning line, already logged where it was
        refused, not RQ's traceback at ERROR; RQ still records the job as failed."""
        if exc_info and isinstance(exc_info[1], JobRefused):
            return
        super().handle_exception(job, *exc_info)  # type: ignore[misc]

    def _record(self, job: Job) -> None:
        carried = is_carrier(_payload(job))
        self.ferret_rq_jobs_taken += 1
        self.ferret_jobs_taken += _carried_count(_payload(job)) if carried else 1
        try:
            if carried:
                reports = self._carried_reports(job)
            else:
                report = report_of(job) or self._piped_report(job) or self._stored_report(job)
                reports = [report] if report is not None else []
        except Exception:
            logger.exception("job=%s cannot read or write the result for its observers", job.id)
            return
        # A dropped late result was logged as dropped; a held one is reported when it is written.
        for report in reports:
            if not report.dropped and not report.held:
                after_job(self.ferret_observers, report)

    def _carried_reports(self, job: Job) -> list[JobReport]:
        """The reports of a carrier's members: those its run in this process left, else (a forked work
        horse ran it, or died) each member's stored result, a member with none ended ``failed`` now, as a
        job whose horse died is. A refused carrier has none (counted here), nor one that is not a carrier."""
        reports = reports_of(job)
        if reports is not None:
            return reports
        refused = refused_reason(job)
        if refused is not None:
            self.ferret_metrics.refused.labels(refused).inc()
            return []
        try:
            members = members_of(_payload(job))
        except NotACarrier:
            return []
        found = []
        for member_id, payload in members:
            result = self.ferret_context.results.read(member_id) or lost_result(
                self.ferret_context, payload, member_id, job.origin, "work horse died while running the job")
            if result is not None:
                found.append(JobReport(result, request_of(payload, self.ferret_context.settings.limits)))
        return found

    def _piped_report(self, job: Job) -> JobReport | None:
        """The report a kept work horse sent with the job's answer (``ferret.rq_layer.kept_horse``)."""
        piped = getattr(self, "piped_report", None)
        sent = piped(job) if piped is not None else None
        if sent is None:
            return None
        result, trace = sent
        return JobReport(RetrievalResult.model_validate_json(result), self._request_of(job),
                         orjson.loads(trace) if trace else None)

    def _stored_report(self, job: Job) -> JobReport | None:
        """The report of a job this process did not leave one for: a forked work horse's, read back
        from Redis; a horse that died wrote none (it is written now); a refused payload has none
        (counted here)."""
        result = self.ferret_context.results.read(job.id)
        if result is None:
            refused = refused_reason(job)
            if refused is not None:
                self.ferret_metrics.refused.labels(refused).inc()
                return None
            result = lost_result(self.ferret_context, _payload(job), job.id, job.origin,
                                 "work horse died while running the job")
            if result is None:  # its payload names another tenant's id: refused, nothing written
                return None
        trace = self.ferret_context.results.trace(result.trace_id) \
            if result.trace_id and self.ferret_context.settings.tracing.otlp_endpoint else None
        return JobReport(result, self._request_of(job), trace)

    def _request_of(self, job: Job) -> RetrievalRequest | None:
        """The request a job's payload carries, for its report (None when it carries none readable)."""
        return request_of(_payload(job), self.ferret_context.settings.limits)


def _payload(job: Job) -> Any:
    return job.args[0] if job.args else None


def _carried_count(payload: Any) -> int:
    """How many requests a carrier took (one when it is not a carrier a producer makes)."""
    try:
        return len(members_of(payload))
    except NotACarrier:
        return 1


class ObservedSimpleWorker(_Observed, JobsPerTrip, OneTripJobStart, CoalescedBookkeeping, SimpleWorker):
    pass


class ObservedForkWorker(_Observed, CoalescedBookkeeping, KeptHorse, Worker):
    """A work horse kept for many jobs (``service.jobs_per_horse``, ``ferret.rq_layer.kept_horse``)."""


class StockSimpleWorker(_Observed, SimpleWorker):
    """RQ's own bookkeeping, every write it makes (``service.lean_bookkeeping: false``)."""


class StockForkWorker(_Observed, Worker):
    """RQ's own bookkeeping, every write it makes (``service.lean_bookkeeping: false``)."""


CLASSES: dict[tuple[str, bool], type[Worker]] = {  # (name, lean bookkeeping) -> Ferret's class
    ("simple", True): ObservedSimpleWorker,  # type: ignore[dict-item]
    ("fork", True): ObservedForkWorker,
    ("simple", False): StockSimpleWorker,  # type: ignore[dict-item]
    ("fork", False): StockForkWorker,
}
WORKER_CLASSES = tuple(dict.fromkeys(name for name, _ in CLASSES))  # the names users give


