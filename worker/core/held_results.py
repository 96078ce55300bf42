"""Batch results held by their worker and written together at the end of their trip.

A worker taking several batch jobs in one trip (``ferret.rq_layer.trip_batching``) ends them together:
RQ's success bookkeeping of the trip is one transaction. Their results are held the same way: each job's
result, trace and waiters' wake-up are the result script's as before (``ferret.results``), queued for the
trip's end and sent as one pipeline just before the success transaction, instead of a round trip each as
the job ends. A batch waits for all of its lines; nobody waits on one of them the ~25 ms a trip lasts.

Each write stands alone (no transaction: one result's outcome is not another's), and each answer is read
as ``ResultStore.write``'s would be:

- written: the job's report goes to the observers (metrics, span export) then, not when the job ended;
- another run's result was there first: this one is dropped and said so, as on a job's own path;
- ``NOSCRIPT`` (a fresh or restarted Redis has not the script): the script is loaded and those writes sent
  once more;
- anything else (the trace id the payload named holds another job's trace, Redis refused the write): that
  one result is written on its own the way a job writes it (``write_with_trace``), which picks a new trace
  id, waits out what it waits out and raises what it raises.

What a crash loses: nothing. A held job is started under its worker (in the started registry) until its
success is sent after its result; a worker killed with results held leaves those jobs to the reaper, which
runs them again (time left) or ends them ``failed`` with the reason, as any job of a dead worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from ferret.contract import RetrievalResult
from ferret.redis_plumbing.lean_transaction import lean_pipeline
from ferret.results import WriteOutcome
from ferret.tracing import SpanCollector
from ferret.worker.core.report import JobReport
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import ResultDropped, dropped, trace_of, write_with_trace

# A held job is still started, and a reaper ends a started job a second past its deadline + grace as overrun:
# a result is held only with more than this left of its job's deadline (``run_job``), and no longer than
# this past it (the trip writes its held results before a job whose deadline is this much later starts).
HOLD_MARGIN_SECONDS = 1.0


@dataclass(frozen=True)
class HeldResult:
    """A finished job's result, with what writing it needs, and the job's report as it stands (``held``)."""

    ctx: WorkerResources
    result: RetrievalResult
    tracer: SpanCollector
    cache: tuple[str, bytes, int] | None
    body: bytes | None
    report: JobReport


def write_held(held: Sequence[HeldResult]) -> list[JobReport | None]:
    """Write ``held`` in one round trip; each job's report as written (None: dropped, another run's result
    was there). See the module for what is written on its own."""
    if not held:
        return []
    store = held[0].ctx.results  # one worker's: the same store for every result it holds
    traces = [trace_of(one.ctx, one.result, one.tracer) for one in held]
    answers: list[Any] = [None] * len(held)
    todo = list(range(len(held)))
    for attempt in range(2):
        with lean_pipeline(store.client) as pipeline:  # the answers are ints: read raw, no callbacks
            for index in todo:
                one = held[index]
                store.write_on(pipeline, one.result, traces[index][1], one.cache, one.body)
            for index, answer in zip(todo, pipeline.execute(raise_on_error=False), strict=True):
                answers[index] = answer
        todo = [index for index in todo if isinstance(answers[index], NoScriptError)]
        if not todo or attempt:
            break
        store.load_write_script()  # a fresh or restarted Redis: once, then those writes again
    if store.replicas is not None:
        store.replicas(f"the results of {len(held)} batch jobs")
    reports: list[JobReport | None] = []
    for one, (trace, _), answer in zip(held, traces, answers, strict=True):
        outcome = answer if isinstance(answer, int) else None  # else an error in its place
        if outcome == WriteOutcome.WRITTEN:
            reports.append(dataclasses.replace(one.report, trace=trace, held=False))
        elif outcome == WriteOutcome.ALREADY_FINAL:
            dropped(one.result)
            reports.append(None)
        else:  # the trace id taken, the script gone, a refusal: written on its own, as a job writes it
            try:
                result, trace = write_with_trace(one.ctx, one.result, one.tracer, one.cache, one.body)
            except ResultDropped:
                reports.append(None)
                continue
            reports.append(dataclasses.replace(one.report, result=result, trace=trace, held=False))
    return reports
