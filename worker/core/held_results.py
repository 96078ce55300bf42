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

**Finished in one call** (``finish_held``): at the trip's end the held results and RQ's success bookkeeping
of the trip (what the worker would send next, as one transaction) go in one script: the results are
written first, by the result script's own code, and RQ's commands run only when every one of them was
written or found another run's result there (whose success is sent on the other path too). Anything else
(a trace id taken, a refusal, an error) runs none of RQ's commands: the results are then written the
other way, as above, and the success is sent after them. A job alone in its trip is held too (nobody's
result waits behind it), so it ends in one round trip instead of two: its result, its waiters' wake-up and
its ``finished`` are one atomic step. Redis keeps a script's writes made before an error: a result written
there is found by the other way's write as written (the same bytes).

What a crash loses: nothing. A held job is started under its worker (in the started registry) until its
success is sent with or after its result; a worker killed with results held leaves those jobs to the reaper,
which runs them again (time left) or ends them ``failed`` with the reason, as any job of a dead worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.client import EMPTY_RESPONSE, Pipeline
from redis.exceptions import NoScriptError, ResponseError

from ferret.contract import RetrievalResult
from ferret.redis_plumbing.lean_transaction import lean_pipeline
from ferret.redis_plumbing.scripts import registered
from ferret.results import WRITE_ARGS, WRITE_KEYS, WRITE_ONCE_FUNCTION, WriteOutcome
from ferret.tracing import SpanCollector
from ferret.worker.core.report import JobReport
from ferret.worker.core.resources import WorkerResources
from ferret.worker.core.results import ResultDropped, dropped, trace_of, write_with_trace

# A held job is still started, and a reaper ends a started job a second past its deadline + grace as overrun:
# a result is held only with more than this left of its job's deadline (``run_job``), and no longer than
# this past it (the trip writes its held results before a job whose deadline is this much later starts).
HOLD_MARGIN_SECONDS = 1.0


# The held results written (ARGV[1] of them, WRITE_KEYS keys and WRITE_ARGS arguments each), then, when each
# was written or found another run's there, the commands: their count, then per command the count of its
# arguments after its key, its name, those arguments (its key is the next of KEYS). Answers {ran, outcomes}.
_FINISH = WRITE_ONCE_FUNCTION + f"""
local held = tonumber(ARGV[1])
local outcomes = {{}}
for i = 1, held do
  outcomes[i] = write_once((i - 1) * {WRITE_KEYS}, 1 + (i - 1) * {WRITE_ARGS})
end
for i = 1, held do
  if outcomes[i] ~= 0 and outcomes[i] ~= 1 then return {{0, outcomes}} end
end
local k = held * {WRITE_KEYS}
local a = 2 + held * {WRITE_ARGS}
local n = tonumber(ARGV[a])
a = a + 1
for c = 1, n do
  local count = tonumber(ARGV[a])
  redis.call(ARGV[a + 1], KEYS[k + c], unpack(ARGV, a + 2, a + 1 + count))
  a = a + 2 + count
end
return {{1, outcomes}}
"""
# What RQ's success and idle bookkeeping sends, every one with its key first: only these ride in the script
# (a command of any other kind sends the trip's end the other way).
_KEY_FIRST = frozenset({"HSET", "HDEL", "HINCRBY", "HINCRBYFLOAT", "HMSET", "ZADD", "ZREM", "SADD", "SREM",
                        "EXPIRE", "PEXPIRE", "PERSIST", "DEL", "UNLINK", "SET", "XADD", "XTRIM", "LREM", "RPUSH",
                        "LPUSH", "LTRIM"})


@dataclass(frozen=True)
class HeldResult:
    """A finished job's result, with what writing it needs, and the job's report as it stands (``held``)."""

    ctx: WorkerResources
    result: RetrievalResult
    tracer: SpanCollector
    cache: tuple[str, bytes, int] | None
    body: bytes | None
    report: JobReport


def _settled(one: HeldResult, trace: dict[str, Any], outcome: int) -> JobReport | None:
    """The report of a held job whose write answered ``WRITTEN`` (as written), or ``ALREADY_FINAL`` (None:
    another run's result was there first, and this one is dropped and said so)."""
    if outcome == WriteOutcome.WRITTEN:
        return dataclasses.replace(one.report, trace=trace, held=False)
    dropped(one.result)
    return None


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
        if outcome in (WriteOutcome.WRITTEN, WriteOutcome.ALREADY_FINAL):
            reports.append(_settled(one, trace, outcome))
        else:  # the trace id taken, the script gone, a refusal: written on its own, as a job writes it
            try:
                result, trace = write_with_trace(one.ctx, one.result, one.tracer, one.cache, one.body)
            except ResultDropped:
                reports.append(None)
                continue
            reports.append(dataclasses.replace(one.report, result=result, trace=trace, held=False))
    return reports


def _commands(pipeline: Pipeline) -> list[tuple[Any, ...]] | None:
    """The commands queued on ``pipeline``, when every one may ride in the finish script."""
    commands = []
    for args, options in pipeline.command_stack:
        name = args[0].upper() if isinstance(args[0], str) else None
        if name not in _KEY_FIRST or len(args) < 2 or EMPTY_RESPONSE in options:
            return None
        commands.append(args)
    return commands


def finish_held(held: Sequence[HeldResult], pipeline: Pipeline) -> list[JobReport | None] | None:
    """Write ``held`` and send the commands queued on ``pipeline`` in one script (see the module); each job's
    report as written (None: dropped, another run's result was there). None when that could not be done in
    one call: a command of another kind, replicas to wait for (their wait goes between the results and the
    success), another server, or a result the script did not write (a trace id taken, a refusal, an error):
    nothing of RQ's was sent then, and the caller writes ``held`` and sends ``pipeline`` the other way.
    The pipeline is left as it was. Redis out of reach raises, as ``write_held`` does."""
    if not held:
        return None
    store = held[0].ctx.results
    commands = _commands(pipeline)
    waits = store.replicas is not None and store.replicas.policy.replicas > 0
    if commands is None or waits or pipeline.connection_pool is not store.client.connection_pool:
        return None
    traces = [trace_of(one.ctx, one.result, one.tracer) for one in held]
    keys_: list[Any] = []
    args: list[Any] = [len(held)]
    for one, (_, kept) in zip(held, traces, strict=True):
        result_keys, result_args = store.keys_and_args(one.result, kept, one.cache, one.body)
        keys_ += result_keys
        args += result_args
    args.append(len(commands))
    for name, key, *rest in commands:
        keys_.append(key)
        args += [len(rest), name, *rest]
    try:
        ran, outcomes = registered(store.client, _FINISH)(keys=keys_, args=args)
    except ResponseError:  # a key of another type, Redis full: the other way says which result, and why
        return None
    if not int(ran):
        return None
    return [_settled(one, trace, int(outcome)) for one, (trace, _), outcome in zip(held, traces, outcomes, strict=True)]
