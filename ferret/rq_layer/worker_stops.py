"""How a worker stops: the signal that asked is kept, a job taken but not started goes back to its
queue, and the recording after a job counts as part of it (a stop then waits for it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rq import Queue
from rq.job import Job, JobStatus
from rq.worker import WorkerStatus

from ferret.worker.core.resources import WorkerResources

logger = logging.getLogger(__name__)


class StopHandling:
    """Mixin for RQ's worker classes."""

    ferret_context: WorkerResources
    ferret_stop_signal: int | None = None  # the signal that asked this worker to stop, if one did
    _state: str

    def request_stop(self, signum: int, frame: Any) -> None:
        if self.ferret_stop_signal is None:
            self.ferret_stop_signal = signum
        super().request_stop(signum, frame)  # type: ignore[misc]

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
