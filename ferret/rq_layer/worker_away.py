"""A worker that outlives Redis going away: RQ's main loop quits on a Redis error anywhere but in its
dequeue (which waits and retries), so around RQ's other calls a Redis out of reach past the clients'
retries is logged and the loop goes on to the dequeue, which waits for it; a registration that expired
meanwhile is made again; heartbeats are short, so a killed worker is noticed within seconds."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from rq import worker_registration
from rq.job import Job

from ferret.repeated_lines import RepeatedLines

logger = logging.getLogger(__name__)
_AWAY = RepeatedLines(logger)

REGISTRATION_CHECK_SECONDS = 5.0


class RedisAwayTolerant:
    """Mixin for RQ's worker classes."""

    @contextmanager
    def _redis_may_be_away(self, what: str) -> Iterator[None]:
        """RQ's main loop quits on a Redis error anywhere but in its dequeue (which waits
        and retries): around RQ's other calls, a Redis out of reach past the clients'
        retries is logged and the loop goes on to the dequeue, which waits for it."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            _AWAY.warning(f"Redis out of reach during {what}",
                          "worker %s: Redis out of reach during %s (%s); carrying on", self.name, what, exc)  # type: ignore[attr-defined]

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None:  # part of a transaction: its caller sends it and sees any error
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]
            return
        with self._redis_may_be_away("a heartbeat"):
            super().heartbeat(timeout, pipeline)  # type: ignore[misc]

    def check_for_suspension(self, burst: bool) -> None:
        with self._redis_may_be_away("the suspension check"):
            super().check_for_suspension(burst)  # type: ignore[misc]

    def _register_again(self) -> None:
        """The worker's registration, again if it is gone. Cut off from Redis for longer than
        its TTL (a job's heartbeat TTL is ``worker_ttl``, 16 s), a worker's key expires and the
        other workers' maintenance drops it from the worker registry: RQ would go on serving
        without it, invisible to ``rq info`` and to the reaper, which then takes every job it
        starts for a lost one."""
        if self.birth_date is None:  # type: ignore[attr-defined]
            return  # not registered yet: RQ does it when the worker starts
        key: str = self.key  # type: ignore[attr-defined]
        connection = self.connection  # type: ignore[attr-defined]
        with connection.pipeline(transaction=False) as pipe:
            pipe.hexists(key, "birth")
            pipe.sismember(self.redis_workers_keys, key)  # type: ignore[attr-defined]
            if all(pipe.execute()):
                return  # the key outlived the outage
        with connection.pipeline() as pipe:
            pipe.hset(key, mapping=self.serialize())  # type: ignore[attr-defined]
            worker_registration.register(self, pipe)  # type: ignore[arg-type]
            pipe.expire(key, self.worker_ttl + 60)  # type: ignore[attr-defined]
            pipe.execute()
        logger.warning("worker %s: Redis is back after its key expired; registered again",
                       self.name)  # type: ignore[attr-defined]

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        """Short, so a killed worker is noticed within seconds (see ferret.rq_layer.reaper)."""
        ttl: int = self.worker_ttl  # type: ignore[attr-defined]
        if job.timeout and job.timeout > 0:
            return min(ttl, int(job.timeout) + 1)
        return ttl
