"""Jobs whose worker died: re-run them or end them ``failed``, visibly.

RQ notices an abandoned job only when its registry entry expires and a
maintenance pass runs (minutes, by default). Ferret workers check every
``reaper_interval_seconds`` instead: a started job whose worker has stopped
heart-beating (its key expired) or whose deadline (+ grace) has passed
without a result is either put back on its queue (time left and fewer than
``max_reruns`` re-runs: at-least-once) or given a ``failed`` result saying
the worker was lost. A job whose worker is alive but still on it past its
deadline (+ grace) ends ``failed`` as overrun, never as lost: a worker's key
outlives a starved job (``ferret.rq_layer.job_pulse``), so a death is blamed
only when the worker's key is gone. A worker runs the jobs of a trip one at a
time, earliest deadline first (``ferret.rq_layer.trip_batching``): of a
worker's overdue jobs only the earliest-deadline one can be running; the
others waited behind it, never started, and end ``expired`` (what the worker
itself gives a job it reaches past its deadline), neither overrun nor lost.
One worker at a time does this, under a short lock. A job judged lost acts only once its started-registry entry is
taken out by the pass: an entry gone meanwhile is a job that ended as it was
judged (its end takes the entry out with its execution record), not a re-run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rq import Queue
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from ferret.contract import RetrievalResult
from ferret.envelope import deadline_of
from ferret.rq_layer.intake import NOT_THE_ENTRY, Refusal, registry_entry_id, take_entry
from ferret.rq_layer.key_types import is_wrong_type, set_aside_wrong_types
from ferret.rq_layer.maintenance import rescue_stranded
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import lost_results

STRANDED_GRACE_SECONDS = 10.0  # a live worker starts a job it took within milliseconds
logger = logging.getLogger(__name__)

LOCK_KEY = "ferret:reaper:lock"
RERUNS = "ferret_reruns"
OVERRAN = "hard timeout: its worker was still running the job when its deadline (+ grace) passed"
WAITED = "waited past its deadline (+ grace) behind another job of its worker's trip; never started"


def _worker_of(ctx: WorkerResources, job: Job, entry: bytes) -> tuple[str | None, bool]:
    """The worker a started job is with (None when nothing names one yet) and whether it still lives (its
    key). The job names its worker once stamped; before, its execution record does (a forking worker writes
    the record, then its work horse stamps the job: a worker cut off between the two left the job unstamped,
    and the job waited for its deadline). An entry with no execution, or an execution that names nobody, is
    a job just starting: alive. A record gone (its TTL passed with no beat renewing it) is a dead worker's."""
    name = job.worker_name
    if not name:
        _, _, execution = entry.partition(b":")
        if not execution:
            return None, True
        record = f"rq:execution:{entry.decode(errors='replace')}"  # RQ's key (the entry is untrusted: not parsed)
        with ctx.client.pipeline(transaction=False) as pipe:
            pipe.exists(record)
            pipe.hget(record, "worker_name")
            there, named = pipe.execute()
        if not there:
            return None, False
        if not named:
            return None, True
        name = named.decode(errors="replace") if isinstance(named, bytes) else str(named)
    return name, bool(ctx.client.exists(f"rq:worker:{name}"))


@dataclass
class _Verdict:
    """One started entry, judged: its job, when it is due, its worker and whether that worker lives."""

    raw: Any
    job: Job
    deadline: float
    overdue: bool
    worker: str | None
    alive: bool


def _behind_another(verdicts: list[_Verdict]) -> set[str]:
    """The overdue jobs that waited in a trip: those of a worker that has an overdue job with an earlier
    deadline (which is the one it runs, or ran last)."""
    first: dict[str, _Verdict] = {}
    for verdict in verdicts:
        if verdict.overdue and verdict.worker is not None:
            known = first.get(verdict.worker)
            if known is None or (verdict.deadline, verdict.job.id) < (known.deadline, known.job.id):
                first[verdict.worker] = verdict
    return {verdict.job.id for verdict in verdicts
            if verdict.overdue and verdict.worker is not None and first[verdict.worker] is not verdict}


def reap(ctx: WorkerResources, queues: Sequence[Queue], now: float | None = None,
         on_refused: Callable[[Refusal], None] = lambda refusal: None) -> list[RetrievalResult]:
    """One pass; returns the ``failed`` results it wrote (re-runs are only logged).

    Registry entries are untrusted like queue entries: one that names no
    Ferret job is removed and handed to ``on_refused``, never re-queued, and a
    failure on one entry does not stop the pass."""
    lock_ms = max(500, int(ctx.settings.service.reaper_interval_seconds * 900))
    if not ctx.client.set(LOCK_KEY, ctx.name, nx=True, px=lock_ms):
        return []
    now = ctx.now() if now is None else now
    written: list[RetrievalResult] = []
    for queue in queues:
        try:
            written.extend(_reap_queue(ctx, queue, now, on_refused))
        except NOT_THE_ENTRY:
            raise
        except Exception as exc:
            if not (is_wrong_type(exc) and set_aside_wrong_types(queue)):  # said once, and repaired
                logger.exception("reaper: queue %s failed", queue.name)
    return written


def _reap_queue(ctx: WorkerResources, queue: Queue, now: float,
                on_refused: Callable[[Refusal], None]) -> list[RetrievalResult]:
    written: list[RetrievalResult] = []
    registry = StartedJobRegistry(queue=queue, serializer=JSONSerializer)
    verdicts = []
    for raw in ctx.client.zrange(registry.key, 0, -1):
        try:
            verdict = _judge(ctx, queue, registry, raw, now, on_refused)
        except NOT_THE_ENTRY:
            raise
        except Exception:
            logger.exception("reaper: entry %r of %s failed", raw[:80], registry.key)
            continue
        if verdict is not None:
            verdicts.append(verdict)
    waited = _behind_another(verdicts)
    for verdict in verdicts:
        try:
            written.extend(_act(ctx, queue, registry, verdict, verdict.job.id in waited))
        except NOT_THE_ENTRY:
            raise
        except Exception:
            logger.exception("reaper: entry %r of %s failed", verdict.raw[:80], registry.key)
    try:  # jobs taken off the queue but never started (their worker stopped in between)
        written.extend(rescue_stranded(queue, ctx, on_refused, now, STRANDED_GRACE_SECONDS))
    except NOT_THE_ENTRY:
        raise
    except Exception as exc:
        if is_wrong_type(exc):
            raise
        logger.exception("reaper: the intermediate queue of %s failed", queue.name)
    return written


def _judge(ctx: WorkerResources, queue: Queue, registry: StartedJobRegistry, raw: Any, now: float,
           on_refused: Callable[[Refusal], None]) -> _Verdict | None:
    """One started-registry entry (``job_id`` or ``job_id:execution_id``), judged; None when there is
    nothing to do with it (finished, or no Ferret job: the entry taken out)."""
    job_id = registry_entry_id(raw)
    if ctx.results.exists(job_id.decode(errors="replace")):
        ctx.client.zrem(registry.key, raw)  # finished: an entry left behind (RQ's own is gone with its success)
        return None
    job, refusal = take_entry(queue.job_class, job_id, queue, ctx.client, JSONSerializer)
    if job is None:
        ctx.client.zrem(registry.key, raw)
        if refusal is not None and refusal.reason != "no_job_hash":
            on_refused(refusal)
        return None
    deadline = deadline_of(job.args[0])
    grace = ctx.settings.service.hard_timeout_grace_seconds
    worker, alive = _worker_of(ctx, job, raw if isinstance(raw, bytes) else str(raw).encode())
    return _Verdict(raw, job, float("inf") if deadline is None else deadline,
                    deadline is None or now > deadline + grace + 1, worker, alive)


def _act(ctx: WorkerResources, queue: Queue, registry: StartedJobRegistry, verdict: _Verdict,
         waited: bool) -> list[RetrievalResult]:
    """What a judged entry calls for: nothing (its live worker is on it in time), a re-run, or its
    ``failed`` results (a carrier's: one for each member without a result); ``expired`` ones when it
    ``waited`` behind another job of its worker's trip."""
    job, overdue, alive = verdict.job, verdict.overdue, verdict.alive
    if alive and not overdue:
        return []
    if not ctx.client.zrem(registry.key, verdict.raw):
        # Gone since the pass read it: the job ended meanwhile (its success or failure takes the entry out
        # with its execution record, which the look at an unstamped job's worker then found missing).
        return []
    reruns = job.meta.get(RERUNS, 0)
    reruns = int(reruns) if isinstance(reruns, int) else 0  # meta is untrusted too
    if not overdue and reruns < ctx.settings.service.max_reruns:
        job.meta[RERUNS] = reruns + 1
        job.save_meta()
        queue.enqueue_job(job, at_front=True)
        logger.warning("job=%s worker %s lost; re-running it", job.id, job.worker_name)
        return []
    if waited:
        logger.warning("job=%s waited in the trip of worker %s past its deadline; ended expired", job.id,
                       verdict.worker)
        return lost_results(ctx, job.args[0], job.id, queue.name, WAITED, status="expired")
    if alive:  # its worker is alive and still on it (a starved machine): late, not lost
        reason = OVERRAN
        logger.warning("job=%s still running on worker %s past its deadline; ended failed", job.id, job.worker_name)
    else:
        reason = "worker lost while running the job" + (" (deadline passed)" if overdue else "")
        logger.warning("job=%s worker %s lost; ended failed", job.id, job.worker_name)
    return lost_results(ctx, job.args[0], job.id, queue.name, reason)
