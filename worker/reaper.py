"""Jobs whose worker died: re-run them or end them ``failed``, visibly.

RQ notices an abandoned job only when its registry entry expires and a
maintenance pass runs (minutes, by default). Ferret workers check every
``reaper_interval_seconds`` instead: a started job whose worker has stopped
heart-beating (its key expired) or whose deadline (+ grace) has passed
without a result is either put back on its queue (time left and fewer than
``max_reruns`` re-runs: at-least-once) or given a ``failed`` result saying
the worker was lost. One worker at a time does this, under a short lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from ferret.contract import RetrievalResult
from worker.job import WorkerContext, lost_result

logger = logging.getLogger(__name__)

LOCK_KEY = "ferret:reaper:lock"
RERUNS = "ferret_reruns"


def _deadline(job: Job) -> float | None:
    payload = job.args[0] if job.args else None
    deadline = payload.get("deadline_at") if isinstance(payload, dict) else None
    return float(deadline) if isinstance(deadline, (int, float)) and not isinstance(deadline, bool) else None


def _worker_alive(ctx: WorkerContext, job: Job) -> bool:
    """A job not yet stamped with its worker is just starting: count it alive."""
    return not job.worker_name or bool(ctx.client.exists(f"rq:worker:{job.worker_name}"))


def reap(ctx: WorkerContext, queues: Sequence[Queue], now: float | None = None) -> list[RetrievalResult]:
    """One pass; returns the ``failed`` results it wrote (re-runs are only logged)."""
    lock_ms = max(500, int(ctx.settings.service.reaper_interval_seconds * 900))
    if not ctx.client.set(LOCK_KEY, ctx.name, nx=True, px=lock_ms):
        return []
    now = time.time() if now is None else now
    grace = ctx.settings.service.hard_timeout_grace_seconds
    written: list[RetrievalResult] = []
    for queue in queues:
        registry = StartedJobRegistry(queue=queue, serializer=JSONSerializer)
        for job_id, execution_id in registry.get_job_and_execution_ids(cleanup=False):
            entry = f"{job_id}:{execution_id}" if execution_id else job_id
            if ctx.results.exists(job_id):
                continue  # finished; RQ tidies its own registry
            try:
                job = Job.fetch(job_id, connection=ctx.client, serializer=JSONSerializer)
            except NoSuchJobError:
                ctx.client.zrem(registry.key, entry)
                continue
            deadline = _deadline(job)
            overdue = deadline is None or now > deadline + grace + 1
            if _worker_alive(ctx, job) and not overdue:
                continue
            ctx.client.zrem(registry.key, entry)
            reruns = int(job.meta.get(RERUNS, 0))
            if not overdue and reruns < ctx.settings.service.max_reruns:
                job.meta[RERUNS] = reruns + 1
                job.save_meta()
                queue.enqueue_job(job, at_front=True)
                logger.warning("job=%s worker %s lost; re-running it", job_id, job.worker_name)
                continue
            reason = "worker lost while running the job" + (" (deadline passed)" if overdue else "")
            written.append(lost_result(ctx, job.args[0] if job.args else None, job_id, queue.name, reason))
            logger.warning("job=%s worker %s lost; ended failed", job_id, job.worker_name)
    return written
