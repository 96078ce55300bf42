"""RQ's periodic registry maintenance, for registries whose entries are untrusted.

RQ's own pass (every ``maintenance_interval``) fetches every abandoned job in
a started registry and runs the failure callback its hash names (an import
of anything), and a malformed id in any registry raises out of the pass and
ends the worker. Ferret's workers run this pass instead, per queue under
RQ's maintenance lock:

- finished and failed registries are trimmed by score (as RQ does: no job
  is read);
- the worker registry drops keys of workers that are gone;
- the intermediate queue (used by a worker serving a single queue) is read
  through the intake's checks: hostile entries are removed and reported; a
  Ferret job stuck there since the previous pass (its worker died between
  taking it and starting it) is put back at the front of its queue, or ends
  ``failed`` when its deadline has passed;
- started registries are left to Ferret's reaper (``ferret.rq_layer.reaper``), which
  re-runs or fails abandoned jobs without running any callback.

Each step is guarded on its own: a failure is logged and the next step runs;
a key of the wrong Redis type is set aside with one warning
(``ferret.rq_layer.key_types``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rq.intermediate_queue import IntermediateQueue
from rq.queue import Queue
from rq.registry import FailedJobRegistry, FinishedJobRegistry
from rq.worker_registration import clean_worker_registry

from ferret.contract import RetrievalResult
from ferret.envelope import deadline_of
from ferret.rq_layer.intake import NOT_THE_ENTRY, Refusal, put_back_commands, registry_entry_id, take_entry
from ferret.rq_layer.key_types import is_wrong_type, set_aside_wrong_types
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import finished, lost_results

logger = logging.getLogger(__name__)


def sweep(queue: Queue, ctx: WorkerResources, on_refused: Callable[[Refusal], None],
          now: float) -> list[RetrievalResult]:
    """One maintenance pass over ``queue``'s registries (see the module);
    returns the ``failed`` results it wrote, for the worker's observers."""
    written: list[RetrievalResult] = []
    steps: list[tuple[str, Callable[[], object]]] = [
        ("finished registry", FinishedJobRegistry(queue=queue).cleanup),
        ("failed registry", FailedJobRegistry(queue=queue).cleanup),
        ("worker registry", lambda: clean_worker_registry(queue)),
        ("intermediate queue", lambda: written.extend(_sweep_intermediate(queue, ctx, on_refused, now))),
    ]
    for name, step in steps:
        try:
            step()
        except NOT_THE_ENTRY:
            raise
        except Exception as exc:
            if is_wrong_type(exc) and set_aside_wrong_types(queue):
                continue  # said once, and repaired: the next pass runs the step
            logger.exception("queue %s: maintenance of the %s failed", queue.name, name)
    return written


def rescue_stranded(queue: Queue, ctx: WorkerResources, on_refused: Callable[[Refusal], None], now: float,
                    grace_seconds: float) -> list[RetrievalResult]:
    """The intermediate-queue step on a clock, for the reaper's frequent pass: a job taken off the queue
    that has not started ``grace_seconds`` after it was first seen there (its worker stopped or died
    between taking and starting it; a live worker starts a job within milliseconds) goes back to the front
    of its queue, and entries of finished jobs are tidied as they are met."""
    return _sweep_intermediate(queue, ctx, on_refused, now, grace_seconds)


def _sweep_intermediate(queue: Queue, ctx: WorkerResources, on_refused: Callable[[Refusal], None],
                        now: float, grace_seconds: float | None = None) -> list[RetrievalResult]:
    written: list[RetrievalResult] = []
    intermediate = IntermediateQueue(queue.key, connection=queue.connection)
    connection = queue.connection
    started = {registry_entry_id(entry) for entry in connection.zrange(queue.started_job_registry.key, 0, -1)}
    for raw in connection.lrange(intermediate.key, 0, -1):
        job, refusal = take_entry(queue.job_class, raw, queue, connection, queue.serializer)
        if job is None:
            connection.lrem(intermediate.key, 1, raw)  # type: ignore[arg-type]
            if refusal is not None:
                on_refused(refusal)
            continue
        if job.id.encode() in started:
            continue  # running: its worker removes it
        if finished(ctx, job.id, job.args[0]):
            connection.lrem(intermediate.key, 1, raw)  # type: ignore[arg-type]  # finished; only the entry was left behind
            continue
        if grace_seconds is None:
            if intermediate.set_first_seen(job.id):
                continue  # maybe just taken: judge it at the next pass
        else:
            first_seen = intermediate.get_first_seen(job.id)
            if first_seen is None:
                intermediate.set_first_seen(job.id)
                continue
            if now - first_seen.timestamp() < grace_seconds:
                continue  # maybe just taken: its worker starts it in a moment
        deadline = deadline_of(job.args[0])
        if deadline is not None and deadline > now:
            with connection.pipeline() as pipe:  # one step: a stop between the two must not lose the job
                put_back_commands(pipe, queue, [raw])  # the front: RQ pops from the left
                pipe.execute()
            logger.warning("job=%s was stuck between dequeue and start; queued again", job.id)
        else:
            written.extend(lost_results(ctx, job.args[0], job.id, queue.name, "worker lost between dequeue and start"))
            connection.lrem(intermediate.key, 1, raw)  # type: ignore[arg-type]  # its result is written (or refused)
            logger.warning("job=%s was stuck between dequeue and start past its deadline; ended failed", job.id)
    return written
