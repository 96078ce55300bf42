"""How a worker stops: the signal that asked is kept, a job taken but not started goes back to its
queue, and the recording after a job counts as part of it (a stop then waits for it).

A stop ends the process within a bound whatever Redis, Sentinel or Cluster is doing. RQ's signal handler
writes the stop's date to Redis, and its shut-down deregisters the worker there: with Redis gone, each of
those waits as long as the client retries (for ever, for a patient client), and a worker that was asked
to stop never did. So the date is written by a thread of its own (the handler never waits on Redis; RQ's
``now()`` in a worker reads no Redis either: ``ferret.rq_layer.clock``), and a watchdog started with the
first stop ends the process ``STOP_BOUND_SECONDS`` after the job in hand is done or past its hard time
limit, when the shut-down is still waiting on Redis then. What it skips is only the deregistration: the
worker's key expires by itself, and the reaper deals with a job whose worker is gone."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rq import Queue
from rq.job import Job, JobStatus
from rq.worker import WorkerStatus

from ferret.rq_layer.intake import put_back_commands
from ferret.worker.core.resources import WorkerResources

logger = logging.getLogger(__name__)

STOP_BOUND_SECONDS = 15.0  # a stopping worker's shut-down may wait on Redis this long after its job, no longer
_WATCH_SECONDS = 0.25


class StopHandling:
    """Mixin for RQ's worker classes."""

    ferret_context: WorkerResources
    ferret_stop_signal: int | None = None  # the signal that asked this worker to stop, if one did
    _state: str
    ferret_job_ends_by: float = 0.0  # monotonic: when the job in hand's hard time limit strikes
    ferret_working = False  # inside RQ's work loop: only then can a stop hang, and only then is it watched

    def work(self, *args: Any, **kwargs: Any) -> bool:
        self.ferret_working = True
        if self.ferret_stop_signal is not None:  # asked before the loop began: RQ's start-up is watched too
            self._watch_stop()
        try:
            return bool(super().work(*args, **kwargs))  # type: ignore[misc]
        finally:
            self.ferret_working = False

    def request_stop(self, signum: int, frame: Any) -> None:
        self._note_stop(signum)
        super().request_stop(signum, frame)  # type: ignore[misc]

    def request_stop_early(self, signum: int, _frame: Any) -> None:
        """The signal handler until RQ's own replace it: RQ registers the worker, then subscribes and sets
        its state (each a wait on Redis), and only then installs its handlers. A stop asked meanwhile is
        noted for RQ's loop to honour at its first turn (RQ's handler would raise there, outside the loop
        that catches it), and watched as any stop is: a start-up waiting on a silent Redis ends within the
        bound too."""
        self._note_stop(signum)
        self._stop_requested = True

    def _note_stop(self, signum: int) -> None:
        if self.ferret_stop_signal is None:
            self.ferret_stop_signal = signum
            if self.ferret_working:
                self._watch_stop()

    def _watch_stop(self) -> None:
        threading.Thread(target=self._exit_if_stuck, name="ferret-stop-watchdog", daemon=True).start()

    def set_shutdown_requested_date(self) -> None:
        """RQ's note of the stop, in Redis: written by a thread of its own, so the signal handler never
        waits on Redis (a failure is RQ's loop's to meet)."""
        def write() -> None:
            try:
                super(StopHandling, self).set_shutdown_requested_date()  # type: ignore[misc]
            except Exception as exc:  # only a note: the stop goes on
                logger.info("worker: the stop's date was not written to Redis (%s)", type(exc).__name__)

        threading.Thread(target=write, name="ferret-stop-date", daemon=True).start()

    def _exit_if_stuck(self) -> None:
        """End the process when, ``STOP_BOUND_SECONDS`` after its job is done (or past its hard limit),
        the stop is still waiting (on Redis: nothing else blocks a stop); return as soon as RQ's work loop
        has returned."""
        idle_since: float | None = None
        while self.ferret_working:
            time.sleep(_WATCH_SECONDS)
            if not self.ferret_working:
                return  # the loop ended by itself: the process (a worker's, or a test's) carries on
            now = time.monotonic()
            busy = self._state == WorkerStatus.BUSY and now < self.ferret_job_ends_by
            idle_since = None if busy else (idle_since or now)
            if idle_since is not None and now - idle_since >= STOP_BOUND_SECONDS:
                logger.warning("worker: stopping took more than %.0f s after the job in hand (Redis does not "
                               "answer?); exiting without deregistering (the worker's key expires by itself)",
                               STOP_BOUND_SECONDS)
                logging.shutdown()
                os._exit(0)

    def _put_back_if_not_started(self, job: Job, queue: Queue) -> None:
        """A stop that still reaches a job before its start (StopRequested
        raised there) must not end it: it goes back to the front of its
        queue, for this worker's successor. One whose start went through is
        the reaper's (its worker is gone: it runs again)."""
        try:
            if job.get_status(refresh=True) != JobStatus.QUEUED:
                return
            with self.ferret_context.client.pipeline() as pipeline:
                put_back_commands(pipeline, queue, [job.id])
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
