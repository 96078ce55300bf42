"""A worker's heart-beat while it runs a job, from a thread the job cannot starve.

The reaper takes a worker for dead when its key ``rq:worker:<name>`` has
expired (``ferret.rq_layer.reaper``). RQ renews that key between jobs and,
in the forking worker, from the parent every ``job_monitoring_interval``; a
job that ran long on a CPU-starved machine outlived the key's TTL (a job's
deadline + 1 s) and a live worker was taken for a lost one.

While a job runs, this thread renews the worker key, the job's execution
record and its started-registry entry every quarter of the TTL. It measures
how late its own beats wake (a starved process wakes late) and lengthens the
TTL it sends by twice the worst lateness of its recent beats, so the margin
follows what the machine is doing. Every command it sends renews and never
creates: a beat racing the job's end cannot bring back a deleted record; a
worker key that expired anyway is registered again
(``RedisAwayTolerant._register_again``).

The forking worker forks its work horse while no beat is in flight
(``paused``): the child never inherits a lock held mid-command.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rq.executions import ExecutionRegistry
from rq.job import Job
from rq.utils import current_timestamp

logger = logging.getLogger(__name__)

BEATS_REMEMBERED = 20  # the lateness margin follows the worst of the recent beats
MAX_MARGIN_SECONDS = 120


class JobPulse:
    """One per worker; ``beating(job, ttl)`` around each job."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker
        self._lock = threading.Lock()  # held for a beat, and by a fork
        self._wake = threading.Event()
        self._job: Job | None = None
        self._ttl = 0
        self._lateness: deque[float] = deque(maxlen=BEATS_REMEMBERED)
        self._thread: threading.Thread | None = None

    def interval(self) -> float:
        return min(5.0, max(0.25, self._ttl / 4))

    def margin(self) -> int:
        """Seconds added to the TTL: twice the worst recent lateness of a beat."""
        return min(MAX_MARGIN_SECONDS, math.ceil(2 * max(self._lateness, default=0.0)))

    @contextmanager
    def beating(self, job: Job, ttl: int) -> Iterator[None]:
        self._job, self._ttl = job, ttl
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="ferret-job-pulse", daemon=True)
            self._thread.start()
        self._wake.set()
        try:
            yield
        finally:
            self._job = None  # no lock: a beat in flight renews, never creates, and must not hold up the job's end

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No beat in flight, and none starts, for the duration (a fork)."""
        with self._lock:
            yield

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            due = time.monotonic() + self.interval()
            while self._job is not None:
                time.sleep(max(0.0, due - time.monotonic()))
                woke = time.monotonic()
                late = max(0.0, woke - due)
                self._lateness.append(late)
                due = woke + self.interval()
                try:
                    self._beat()
                except Exception as exc:  # Redis away: the next beat tries again; the job is not ours to stop
                    logger.warning("worker %s: a job's heart-beat failed (%s)", self._worker.name, exc)

    def _beat(self) -> None:
        with self._lock:
            job = self._job
            if job is None:
                return
            worker = self._worker
            ttl = self._ttl + self.margin()
            executions = list(worker.executions.values())
            with worker.connection.pipeline(transaction=False) as pipe:
                pipe.expire(worker.key, ttl)
                for execution in executions:
                    pipe.expire(execution.key, ttl)
                    pipe.zadd(job.started_job_registry.key, {execution.composite_key: current_timestamp() + ttl},
                              xx=True)
                    pipe.zadd(ExecutionRegistry(job_id=execution.job_id, connection=worker.connection).key,
                              {execution.id: current_timestamp() + ttl + 60}, xx=True)  # RQ's score there
                alive = pipe.execute()[0]
            if not alive:  # expired anyway (a stall longer than the TTL): registered again, as after an outage
                worker._register_again()
