"""How a client waits for a job's final result: one policy for both clients.

The policy is a generator that says what to do, and the blocking ``Producer`` and the asyncio
``AsyncProducer`` do it (h11's shape: the rules say, the shells do the I/O):

- ``AwaitResult(seconds)``: wait up to ``seconds`` for the result; send back the result or None.
- ``RunRule(step)``: run one of ``ProducerRules``' steps; send back its answer.
- ``Pause(seconds)``: sleep (Redis is out of reach); send back nothing.

A Redis connection failure while doing one of them is thrown into the generator, which waits it out
within the timeout (``RedisAway``). A job gone from every queue and registry with no result is
checked once per ``redis.failover_check_seconds``: refused by the workers (its signature, say), the
wait ends with that ``failed`` result and the reason; else a failover lost it, and it is enqueued again. The end is the
result (checked to be the one asked for), ``ResultTimeout`` with RQ's state of the job, or
``RedisUnreachable`` when Redis was still away at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import redis

from ferret.contract import RetrievalResult
from ferret.errors import RedisUnreachable
from ferret.producer.rules import JobHandle, ProducerRules, RedisAway, check_owner, job_id_of
from ferret.steps import Step

# What a shell catches and throws into the policy: Redis out of reach (redis-py's own, a socket's, and the
# clients' RedisUnreachable, which they raise for it).
AWAY_ERRORS: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError,
                                                 RedisUnreachable)


@dataclass(frozen=True)
class AwaitResult:
    job_id: str
    seconds: float


@dataclass(frozen=True)
class RunRule:
    step: Step[Any]


@dataclass(frozen=True)
class Pause:
    seconds: float


Action = AwaitResult | RunRule | Pause
Waiting = Generator[Action, Any, RetrievalResult]


def waiting(rules: ProducerRules, job: JobHandle | str, timeout: float, check_seconds: float,
            monotonic: Callable[[], float] = time.monotonic) -> Waiting:
    """The wait for ``job``'s final result, at most ``timeout`` seconds."""
    job_id = job_id_of(job)
    # A job of this request's own is watched for loss and refusal; one it joined, for refusal (its own
    # request enqueues it again if it is lost).
    watch = isinstance(job, JobHandle) and (job.request is not None or job.coalesced) and check_seconds > 0
    until = monotonic() + timeout
    away = RedisAway(job_id)
    found: RetrievalResult | None = None
    while True:
        left = max(0.0, until - monotonic())
        try:
            found = yield AwaitResult(job_id, min(left, check_seconds) if watch else left)
            if found is None and watch and left > check_seconds:
                assert isinstance(job, JobHandle)
                if (yield RunRule(rules.lost(job))):
                    found = yield RunRule(rules.refused(job))
                    if found is None and job.request is not None:
                        yield RunRule(rules.enqueue_again(job))
        except AWAY_ERRORS as exc:
            assert isinstance(exc, Exception)
            away.failed(exc)
            yield Pause(min(1.0, max(0.0, until - monotonic())))
        else:
            away.answered()
        if found is not None or until - monotonic() <= 0:
            break
    if found is None and (unreachable := away.unreachable(timeout)) is not None:
        raise unreachable
    if found is None:
        raise (yield RunRule(rules.timed_out(job, timeout)))
    if isinstance(job, JobHandle):
        check_owner(found, job)
    return found
