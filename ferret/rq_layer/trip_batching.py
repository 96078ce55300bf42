"""Several jobs per round trip when the queue is deep (``service.jobs_per_trip``; the lean simple worker).

A short Ferret job spends more of a worker's CPU on its round trips to Redis than on its search: each
trip costs the client ~0.1 ms of CPU whatever it carries, and a job made four (take, start, result,
success; a lone job's result and success are one trip now, see **end**). When more jobs wait than the
one in hand, the worker takes several in one trip and ends them together:

- **take**: one Lua call takes up to ``take_up_to`` waiting entries of the first queue that has any, and
  no more than are waiting: one job when one waits, so a lone job's latency is what it was
  (``ferret.rq_layer.intake``). The first is run; the others are held by the worker.
- **start**: the first job's start transaction starts the held ones too: every taken job is in its
  queue's started registry with an execution record of this worker from then on, so the reaper sees
  every one of them (a worker lost mid-batch loses none: the reaper re-runs or ends them, as any job of a
  dead worker), and the job pulse renews all of them while the worker runs any.
- **run**: each job runs as before, one after the other, earliest deadline first (ties in queue order):
  its deadline is checked when it starts, its hard time limit is its own, its result is written (and its
  waiters woken) as soon as it is done. The order matters to the reaper, which ends a job of a live worker
  still unfinished a second past its deadline + grace as overrun: a job's pipeline stops at its deadline
  (its budget), so in deadline order a job behind another starts by the other's deadline, its own at the
  latest, and is not taken for an overrun one (unless a stage hangs past its budget, when the job ahead
  is itself overrun); a job already past its deadline runs first and ends ``expired`` at once.
- **end**: RQ's success bookkeeping of each job is kept back and sent with the last job's (one
  transaction), or sooner when ``FLUSH_SECONDS`` have passed since the first was kept back. A batch job's
  result is held the same way, and the held results and that bookkeeping go in one script when each result
  is written there (else the results in one pipeline, then the transaction: ``ferret.worker.core.held_results``);
  a prefetch job with others behind it in its trip is written as it ends (its waiter waits on it), and a
  job alone in its trip ends in that one script (its result and its success in one round trip, not two).
  A held job is still started, and
  the reaper ends a started job a second past its deadline + grace as overrun, so a result is held only
  with over ``HOLD_MARGIN_SECONDS`` of its deadline left (``run_job``), and the results held are written
  before a job whose deadline is more than that later than theirs starts: each job ends by its own
  deadline (its budget), so every held result is written by its deadline + ``HOLD_MARGIN_SECONDS``, before
  the reaper's turn (unless a stage hangs past its budget: then the job running is overrun too).

How many are taken follows the recent jobs: as many as would use ``TRIP_SECONDS`` of the worker's CPU,
and no more than would last ``TRIP_WALL_SECONDS`` on the clock (at most ``service.jobs_per_trip``). So a
prefetch job arriving behind a batch waits about ``TRIP_SECONDS`` on an unloaded machine, a loaded
machine does not turn batching off (the CPU rule: the jobs' cost decides, not the machine's load), and
jobs that wait on something else (an LLM's answer, a remote store: little CPU, long on the clock) are
taken one at a time, left for the other workers.

A stop (SIGTERM, ``--max-jobs``) between two jobs of a batch puts the held jobs back at the front of their
queue, in order, started records undone, for the next worker; a worker killed outright leaves them
started under its name, for the reaper.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.registry import StartedJobRegistry
from rq.worker import WorkerStatus

from ferret.carriers import is_carrier
from ferret.envelope import deadline_of
from ferret.redis_plumbing.lean_transaction import lean_transaction
from ferret.rq_layer.bookkeeping import lean_success, start_sent
from ferret.rq_layer.intake import put_back_commands
from ferret.worker.core.held_results import HOLD_MARGIN_SECONDS, HeldResult, finish_held, write_held
from ferret.worker.core.report import JobReport, after_job

logger = logging.getLogger(__name__)

TRIP_SECONDS = 0.025  # how much of the worker's CPU the jobs of one trip may take, by the recent jobs' cost
TRIP_WALL_SECONDS = 0.25  # and how long they may last on the clock
FLUSH_SECONDS = 0.25  # success bookkeeping kept back no longer than this
_SMOOTHING = 0.2  # weight of the latest job in the running mean of a job's seconds
HELD_QUEUE = "batch"  # whose jobs' results wait for their trip's end (nobody waits on one line of a batch)


class HeldResultsUnwritten(Exception):
    """The results held for a trip's end could not be written: nor was their jobs' success sent."""


@contextmanager
def _success_dropped_on_failure(pipeline: Any) -> Iterator[None]:
    """Around writing the held results: when that fails, the success kept back on ``pipeline`` is dropped
    (its jobs stay started, for the reaper), and a failure other than a stop is ``HeldResultsUnwritten``."""
    try:
        yield
    except StopRequested:
        if pipeline is not None:
            pipeline.reset()
        raise
    except Exception as exc:
        if pipeline is not None:
            pipeline.reset()
        raise HeldResultsUnwritten(str(exc)) from exc


def _deadline(job: Job) -> float:
    """A taken job's deadline (its payload was checked at intake; one without a valid one goes last)."""
    deadline = deadline_of(job.args[0]) if job.args else None
    return deadline if deadline is not None else float("inf")


class JobsPerTrip:
    """Mixin for the lean simple worker (put it before ``OneTripJobStart``)."""

    ferret_jobs_per_trip = 1  # the most one trip may take (service.jobs_per_trip)
    queue_class: Any
    connection: Any
    executions: dict[str, Execution]
    _ferret_state_written: str | None
    _stop_requested: bool
    _ferret_job_seconds: tuple[float, float] | None = None  # running means of a job's CPU and clock seconds
    _ferret_prestarted: dict[str, Execution] | None = None
    _ferret_kept_back: Any = None  # a pipeline holding the success bookkeeping of finished jobs
    _ferret_kept_since = 0.0
    _ferret_held_results: list[HeldResult] | None = None  # results written at the trip's end
    ferret_held_queue: str | None = HELD_QUEUE  # None: each result written as its job ends (bench result-writes)

    def _held(self) -> deque[tuple[Job, Queue]]:
        held = getattr(self.queue_class, "held", None)
        return held if held is not None else deque()

    def _prestarted(self) -> dict[str, Execution]:
        if self._ferret_prestarted is None:
            self._ferret_prestarted = {}
        return self._ferret_prestarted

    def execute_job(self, job: Job, queue: Queue) -> Any:
        held = self._ferret_held_results
        if held and _deadline(job) > min(one.result.timestamps.deadline_at for one in held) + HOLD_MARGIN_SECONDS:
            # This job may run until its own deadline: the results held are written first, before a reaper
            # could take one of their jobs, still started, for an overrun one (see the module).
            self.end_trip()
        began = time.process_time(), time.monotonic()
        # A batch job that is not alone in its trip (a carrier's members are not): its result is written with
        # the trip's others. A job alone in its trip (nobody's job waits behind it): its result is written
        # with its success, in one call (``finish_held``).
        batch = job.origin == self.ferret_held_queue and (
            self._held() or self._ferret_held_results or (job.args and is_carrier(job.args[0])))
        job.ferret_hold = self._hold if self.ferret_held_queue is not None and (  # type: ignore[attr-defined]
            batch or not self._held()) else None
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            self._size_next_trip(time.process_time() - began[0], time.monotonic() - began[1])
            if not self._held():  # the batch is over, however its last job ended
                self.end_trip()

    def check_for_suspension(self, burst: bool) -> None:
        """Jobs taken with a batch are run first (like the job in hand); ``rq suspend`` then applies."""
        if not self._held():
            super().check_for_suspension(burst)  # type: ignore[misc]

    def _size_next_trip(self, cpu: float, clock: float) -> None:
        mean = self._ferret_job_seconds
        mean = (cpu, clock) if mean is None else ((1 - _SMOOTHING) * mean[0] + _SMOOTHING * cpu,
                                                  (1 - _SMOOTHING) * mean[1] + _SMOOTHING * clock)
        self._ferret_job_seconds = mean
        if getattr(self.queue_class, "held", None) is not None:
            fits = min(TRIP_SECONDS / max(mean[0], 1e-6), TRIP_WALL_SECONDS / max(mean[1], 1e-6))
            self.queue_class.take_up_to = max(1, min(self.ferret_jobs_per_trip, int(fits)))

    def dequeue_job_and_maintain_ttl(self, timeout: int | None,
                                     max_idle_time: int | None = None) -> tuple[Job, Queue] | None:
        """The next job; a fresh trip's jobs in deadline order (see the module)."""
        taken = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)  # type: ignore[misc]
        held = self._held()
        if taken is None or not held or taken[0].id in self._prestarted():
            return cast(tuple[Job, Queue] | None, taken)
        trip = sorted([taken, *held], key=lambda pair: _deadline(pair[0]))
        held.clear()
        held.extend(trip[1:])
        return cast(tuple[Job, Queue], trip[0])

    def prepare_execution(self, job: Job) -> Execution:
        """A held job's start went with its batch's first; the first starts every held one."""
        execution = self._prestarted().pop(job.id, None)
        if execution is not None:
            return execution
        held = [other for other, _ in self._held() if other.id not in self._prestarted()]
        if not held:
            return super().prepare_execution(job)  # type: ignore[misc, no-any-return]
        with lean_transaction(self.connection) as pipeline:
            ttl = max(self.get_heartbeat_ttl(other) for other in [job, *held])  # type: ignore[attr-defined]
            execution = self.start_commands(job, ttl, pipeline)  # type: ignore[attr-defined]
            for other in held:
                self._prestarted()[other.id] = self.start_commands(other, ttl, pipeline)  # type: ignore[attr-defined]
            self.set_state(WorkerStatus.BUSY, pipeline=pipeline)  # type: ignore[attr-defined]
            self.heartbeat(ttl, pipeline=pipeline)  # type: ignore[attr-defined]
            start_sent(pipeline, job)
        return execution

    def handle_job_success(self, job: Job, queue: Queue, started_job_registry: StartedJobRegistry,
                           execution: Execution) -> None:
        """Kept back while more jobs of the batch wait (see the module); sent with the last one's."""
        if not lean_success(job, queue):
            if not self.end_trip():  # this job too is left to the reaper (which finds its result, if written)
                return
            super().handle_job_success(job, queue, started_job_registry, execution)  # type: ignore[misc]
            return
        if self._ferret_kept_back is None:
            self._ferret_kept_back = lean_transaction(self.connection)
            self._ferret_kept_since = time.monotonic()
        self.success_commands(job, execution, self._ferret_kept_back)  # type: ignore[attr-defined]
        if self._held() and not self._stop_requested \
                and time.monotonic() - self._ferret_kept_since < FLUSH_SECONDS:
            # Still busy with the batch, in Redis's eyes too: RQ's "idle" after the job is not sent.
            self._ferret_state_written = WorkerStatus.IDLE
            return
        if self.end_trip(idle=True):
            self.log.info("Successfully completed job %s in %ss on worker %s",  # type: ignore[attr-defined]
                          job.id, job.ended_at - job.started_at, self.name)  # type: ignore[attr-defined, operator]

    def end_trip(self, idle: bool = False) -> bool:
        """``send_kept_back``; whether it was sent. Results that could not be written leave their jobs to
        the reaper (said so), and the worker goes on: neither RQ's failure of the job in hand nor a stop."""
        try:
            self.send_kept_back(idle)
        except HeldResultsUnwritten as exc:
            logger.error("worker %s: the results held for the end of a trip could not be written (%s); their "
                         "jobs stay started under this worker, for the reaper to run again",
                         self.name, exc)  # type: ignore[attr-defined]
            return False
        return True

    def _hold(self, result: HeldResult) -> None:
        if self._ferret_held_results is None:
            self._ferret_held_results = []
        self._ferret_held_results.append(result)

    def write_held_results(self) -> None:
        """The results held for the trip's end, written now; the observers hear of each job written."""
        held, self._ferret_held_results = self._ferret_held_results, None
        self._tell_observers(write_held(held or []))

    def _tell_observers(self, reports: list[JobReport | None]) -> None:
        for report in reports:
            if report is not None:
                after_job(getattr(self, "ferret_observers", ()), report)

    def send_kept_back(self, idle: bool = False) -> None:
        """The results held, written; then the success bookkeeping kept back, sent (with "idle" when the
        batch is over). Results that could not be written take their jobs' success with them: those jobs
        stay started under this worker, for the reaper (a success sent later would end a job with no
        result)."""
        pipeline, self._ferret_kept_back = self._ferret_kept_back, None
        if pipeline is not None and idle:
            self.idle_commands(pipeline)  # type: ignore[attr-defined]
        if pipeline is not None and self._ferret_held_results and self._finished_in_one_call(pipeline):
            if idle:
                self._ferret_state_written = WorkerStatus.IDLE
            return
        with _success_dropped_on_failure(pipeline):
            self.write_held_results()
        if pipeline is None:
            return
        with pipeline:
            pipeline.execute()
        if idle:
            self._ferret_state_written = WorkerStatus.IDLE

    def _finished_in_one_call(self, pipeline: Any) -> bool:
        """The results held and the commands on ``pipeline`` sent in one call (``finish_held``); False: not
        (nothing of ``pipeline``'s was sent, the results are written the other way). Redis out of reach
        raises ``HeldResultsUnwritten``, as writing them the other way does."""
        with _success_dropped_on_failure(pipeline):
            reports = finish_held(self._ferret_held_results or [], pipeline)
        if reports is None:
            return False
        self._ferret_held_results = None
        pipeline.reset()
        self._tell_observers(reports)
        return True

    def put_back_held(self) -> None:
        """The held jobs back at the front of their queues, in order, their starts undone."""
        held = list(self._held())
        self._held().clear()
        if not held:
            return
        prestarted = self._prestarted()
        with self.connection.pipeline() as pipeline:
            for job, queue in reversed(held):
                execution = prestarted.pop(job.id, None)
                if execution is not None:
                    execution.delete(job=job, pipeline=pipeline)
                    self.executions.pop(execution.id, None)
                    pipeline.hset(job.key, "status", JobStatus.QUEUED)
                put_back_commands(pipeline, queue, [job.id])
            pipeline.execute()
        logger.info("worker %s: %d job(s) taken with a batch and not run went back to their queue",
                    self.name, len(held))  # type: ignore[attr-defined]

    def teardown(self) -> None:
        try:
            self.send_kept_back(idle=True)
            self.put_back_held()
        except Exception as exc:  # Redis away: the reaper re-runs what was started under this worker
            logger.warning("worker %s: could not put back the jobs taken with a batch (%s); the reaper will",
                           self.name, exc)  # type: ignore[attr-defined]
        super().teardown()  # type: ignore[misc]
