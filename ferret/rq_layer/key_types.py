"""RQ's keys of a queue that hold the wrong Redis type, set aside.

A string where RQ keeps a sorted set (a registry), a hash where it keeps a
list (a queue): every command on it answers WRONGTYPE, so every maintenance
and reaper pass would fail on it again, forever. Such a key holds nothing
RQ could have written, so it is renamed aside (``ferret:set-aside:<key>``,
kept a day for an operator to look at) with one warning, and RQ starts the
key afresh when it next writes one. Checked only after a WRONGTYPE answer:
a pass that meets none pays nothing.
"""

from __future__ import annotations

import logging

import redis
from rq.intermediate_queue import IntermediateQueue
from rq.queue import Queue

logger = logging.getLogger(__name__)

SET_ASIDE_PREFIX = "ferret:set-aside:"
SET_ASIDE_SECONDS = 86_400


def is_wrong_type(exc: BaseException) -> bool:
    """A WRONGTYPE answer, alone or as redis-py words it for a command of a pipeline."""
    text = str(exc)
    return isinstance(exc, redis.ResponseError) and (text.startswith("WRONGTYPE") or
                                                     "caused error: WRONGTYPE" in text)


def expected_types(queue: Queue) -> dict[str, bytes]:
    """Each key of ``queue`` that RQ and Ferret's passes read, and the Redis type it must have."""
    return {
        queue.key: b"list",
        IntermediateQueue(queue.key, connection=queue.connection).key: b"list",
        queue.started_job_registry.key: b"zset",
        queue.finished_job_registry.key: b"zset",
        queue.failed_job_registry.key: b"zset",
        queue.deferred_job_registry.key: b"zset",
        queue.scheduled_job_registry.key: b"zset",
    }


def set_aside_wrong_types(queue: Queue) -> list[str]:
    """Rename aside every key of ``queue`` of the wrong type (one warning each); the keys moved."""
    expected = expected_types(queue)
    connection = queue.connection
    with connection.pipeline(transaction=False) as pipe:
        for key in expected:
            pipe.type(key)
        found = pipe.execute()
    moved = []
    for (key, wanted), kind in zip(expected.items(), found, strict=True):
        have = kind if isinstance(kind, bytes) else str(kind).encode()
        if have in (b"none", wanted):
            continue
        aside = SET_ASIDE_PREFIX + key
        with connection.pipeline() as pipe:
            pipe.rename(key, aside)
            pipe.expire(aside, SET_ASIDE_SECONDS)
            pipe.execute()
        logger.warning("%s held a Redis %s where RQ keeps a %s: moved aside to %s (kept a day)", key,
                       have.decode(errors="replace"), wanted.decode(), aside)
        moved.append(key)
    return moved
