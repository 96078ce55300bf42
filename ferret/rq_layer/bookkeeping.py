"""Fewer Redis round trips for RQ's own worker bookkeeping (an optional layer:
``service.lean_bookkeeping``; off, RQ's worker classes run untouched).

RQ 3's ``SimpleWorker`` makes about 19 round trips to Redis per Ferret job
(``ferret bench round-trips``); several repeat what it has just said: the
worker key's heart-beat is sent around every dequeue (each an HSET and then
EXPIREs), the ``idle`` state is written at the end of a job and again at the
top of the next loop, the ``rq suspend`` flag is read before every job, the
job's ``last_heartbeat`` is written once more just before the job is saved
whole, and a job's start takes two transactions. A round trip costs about as
much as Ferret's fast-path pipeline, so:

- a heart-beat that would push the worker key's expiry later by less than
  ``COALESCE_SECONDS`` is skipped (one that shortens or really extends the
  expiry, or rides on a caller's pipeline, is always sent), and one that is
  sent goes as one round trip;
- a state already written directly is not written again;
- the suspension flag is read at most every ``COALESCE_SECONDS`` (``rq
  suspend`` takes effect within that time instead of at the next job);
- the end-of-execution stamp on the job stays in memory: the success
  handling that follows saves the whole job hash, stamp included;
- Ferret's queues look up no dependents after a job (``LeanQueue``): Ferret
  jobs are never the ``depends_on`` of another job, so there are none; and
  so a job's success is saved in one MULTI/EXEC without RQ's WATCH on the
  dependents key, with the worker's ``idle`` state and idle heart-beat (which
  the loop would send next) in the same round trip; a job that keeps no
  record of its success (``result_ttl=0``: every Ferret job) is deleted in
  that same transaction, without the reads RQ's ``Job.delete`` makes;
- a worker that runs jobs in its own process (``SimpleWorker``) sends the
  execution record, its ``busy`` state and the job's start in one
  transaction (``OneTripJobStart``; RQ sends two, because its forking worker
  splits them between parent and work horse).

Nothing RQ or Ferret reads changes meaning: the worker key lives as long as
before, ``last_heartbeat`` is at most ``COALESCE_SECONDS`` old, and the
reaper's liveness test (does the worker key exist) is untouched. The layer
overrides RQ internals: the version it was written for is pinned in
pyproject.toml, and with the layer off an RQ release costs round trips, not
the worker.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from rq.executions import Execution, ExecutionRegistry
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.registry import StartedJobRegistry
from rq.results import Result
from rq.worker import WorkerStatus

from ferret.redis_plumbing.lean_transaction import lean_transaction
from ferret.rq_layer.clock import rq_now as utc_now
from ferret.rq_layer.key_types import is_wrong_type, set_aside_wrong_types

PARKED = "ferret_parked"  # a taken job's attribute: its entry is in its queue's intermediate queue (intake)


def parked(job: Job, default: bool) -> bool:
    """Whether ``job``'s entry waits in its queue's intermediate queue for its start to take it out; ``default``
    for a job the intake did not mark."""
    return bool(getattr(job, PARKED, default))


def start_sent(pipeline: Any, job: Job) -> None:
    """A start transaction sent. A key of the job's queue holding another type (written between the take and
    the start: the intermediate queue's LREM fails, the rest of the transaction stands) is set aside, said
    once, and the start goes on, as a maintenance pass would have it."""
    try:
        pipeline.execute()
    except redis.ResponseError as exc:
        if not (is_wrong_type(exc) and set_aside_wrong_types(Queue(job.origin, connection=job.connection))):
            raise

COALESCE_SECONDS = 0.5


class LeanQueue(Queue):
    def enqueue_dependents(self, job: Job, exclude_job_id: str | None = None,
                           refresh_job_status: bool = True) -> dict[str, list[str]]:
        """Ferret jobs have no dependents: nothing to enqueue (RQ would ask Redis)."""
        return {}


def forget_job(job: Job, pipeline: Any) -> None:
    """What RQ's ``Job.delete`` does to a job that just succeeded with
    ``result_ttl=0``, inside the success transaction and without its reads
    (RQ's reads the job's status and its executions first: seven round trips).
    Its execution is already gone (``cleanup_execution``); a success is in no
    queue and no registry; Ferret jobs have no dependents and no group."""
    pipeline.delete(job.key, job.dependents_key, job.dependencies_key, Result.get_key(job.id),
                    ExecutionRegistry(job_id=job.id, connection=job.connection).key)


class CoalescedBookkeeping:
    """Mixin for an RQ worker class (put it before the RQ class)."""

    worker_ttl: int
    _ferret_key_expires = 0.0  # monotonic time the worker key expires, as last sent
    _ferret_state_written: str | None = None
    _state: str
    _ferret_suspension_checked = float("-inf")

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        ttl = timeout or self.worker_ttl + 60  # RQ's default
        now = time.monotonic()
        if pipeline is None and 0 <= now + ttl - self._ferret_key_expires < COALESCE_SECONDS:
            return
        if pipeline is None:
            with self.connection.pipeline(transaction=False) as own:  # type: ignore[attr-defined]
                super().heartbeat(timeout, own)  # type: ignore[misc]
                own.execute()
        else:
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]
        self._ferret_key_expires = now + ttl

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == self._ferret_state_written:
            self._state = state  # RQ's in-memory state, which its signal handler reads
            return
        super().set_state(state, pipeline)  # type: ignore[misc]
        self._ferret_state_written = state if pipeline is None else None

    def check_for_suspension(self, burst: bool) -> None:
        now = time.monotonic()
        if now - self._ferret_suspension_checked < COALESCE_SECONDS:
            return
        super().check_for_suspension(burst)  # type: ignore[misc]
        self._ferret_suspension_checked = time.monotonic()

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """RQ's, the job's entry taken out of its intermediate queue when it is there, whatever number of
        queues the worker serves: a Ferret queue's take puts it there (``ferret.rq_layer.intake``)."""
        super().prepare_job_execution(job, parked(job, remove_from_intermediate_queue))  # type: ignore[misc]

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        job.ended_at = job.last_heartbeat = utc_now()

    def handle_job_success(self, job: Job, queue: Queue, started_job_registry: StartedJobRegistry,
                           execution: Execution) -> None:
        """RQ 3's success bookkeeping as one transaction, without the WATCH
        that guards dependents (there are none, see ``LeanQueue``)."""
        if not lean_success(job, queue):
            super().handle_job_success(job, queue, started_job_registry, execution)  # type: ignore[misc]
            return
        with lean_transaction(self.connection) as pipeline:  # type: ignore[attr-defined]
            self.success_commands(job, execution, pipeline)
            self.idle_commands(pipeline)
            pipeline.execute()
        self._ferret_state_written = WorkerStatus.IDLE
        self.log.info("Successfully completed job %s in %ss on worker %s",  # type: ignore[attr-defined]
                      job.id, job.ended_at - job.started_at, self.name)  # type: ignore[attr-defined, operator]

    def success_commands(self, job: Job, execution: Execution, pipeline: Any) -> None:
        """What RQ writes for a job's success (its counters, its records gone), into ``pipeline``."""
        assert job.started_at and job.ended_at
        self.increment_successful_job_count(pipeline=pipeline)  # type: ignore[attr-defined]
        self.increment_total_working_time(job.ended_at - job.started_at, pipeline)  # type: ignore[attr-defined]
        result_ttl = job.get_result_ttl(self.default_result_ttl)  # type: ignore[attr-defined]
        if result_ttl != 0:
            job._handle_success(result_ttl, pipeline=pipeline, worker_name=self.name,  # type: ignore[attr-defined]
                                execution_id=execution.id, execution_started_at=execution.created_at,
                                execution_ended_at=job.ended_at)
            job.cleanup(result_ttl, pipeline=pipeline, remove_from_queue=False)
        job._status = JobStatus.FINISHED
        self.cleanup_execution(job, pipeline=pipeline, execution=execution)  # type: ignore[attr-defined]
        if result_ttl == 0:
            forget_job(job, pipeline)

    def idle_commands(self, pipeline: Any) -> None:
        """Redis hears "idle" now; the worker itself stays busy until RQ
        sets the state after the job, so a SIGTERM arriving meanwhile is
        still a warm shut-down (an idle worker's is an exception). With it,
        the idle worker's expiry, which the next loop would send."""
        pipeline.hset(self.key, "state", WorkerStatus.IDLE)  # type: ignore[attr-defined]
        self.heartbeat(pipeline=pipeline)


def lean_success(job: Job, queue: Queue) -> bool:
    """A success the lean way may save: a Ferret queue's job with none of RQ's repeats, rate limits or groups."""
    return isinstance(queue, LeanQueue) and not (job.repeats_left or job.has_rate_limit or job.group_id)


class OneTripJobStart:
    """Mixin for a worker that runs jobs in its own process (put it before
    ``CoalescedBookkeeping``): RQ's two start-of-job transactions as one."""

    executions: dict[str, Execution]

    def prepare_execution(self, job: Job) -> Execution:
        """The execution record, ``busy``, and what ``prepare_job_execution``
        would send next (heart-beats, the job's start), at once."""
        with lean_transaction(self.connection) as pipeline:  # type: ignore[attr-defined]
            heartbeat_ttl = self.get_heartbeat_ttl(job)  # type: ignore[attr-defined]
            execution = self.start_commands(job, heartbeat_ttl, pipeline)
            self.set_state(WorkerStatus.BUSY, pipeline=pipeline)  # type: ignore[attr-defined]
            self.heartbeat(heartbeat_ttl, pipeline=pipeline)  # type: ignore[attr-defined]
            start_sent(pipeline, job)
        return execution

    def start_commands(self, job: Job, heartbeat_ttl: int, pipeline: Any) -> Execution:
        """What RQ writes for a job's start (its execution record, registries, ``started``), into ``pipeline``."""
        execution = Execution.create(job, heartbeat_ttl, pipeline=pipeline,
                                     worker_name=self.name)  # type: ignore[attr-defined]
        self.executions[execution.id] = execution
        job.prepare_for_execution(self.name, pipeline=pipeline)  # type: ignore[attr-defined]  # sets last_heartbeat
        pipeline.persist(job.key)
        # Out of the intermediate queue, where the take put it whatever number of queues this worker serves
        # (RQ's rule, for a job the intake did not mark: there only for a worker of one queue).
        if parked(job, len(self.queues) == 1):  # type: ignore[attr-defined]
            origin = Queue(job.origin, connection=self.connection)  # type: ignore[attr-defined]
            pipeline.lrem(origin.intermediate_queue_key, 1, job.id)
        return execution

    def prepare_job_execution(self, job: Job, remove_from_intermediate_queue: bool = False) -> None:
        """Already sent by ``prepare_execution``, just before."""
        self.procline(f"Processing {job.func_name} from {job.origin} since {time.time()}")  # type: ignore[attr-defined]
