"""Run ``ferret.steps`` rules with redis-py's asyncio client: the loop is never blocked."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, TypeVar

import redis
import redis.asyncio as aredis
from redis.commands.core import AsyncScript

from ferret.redis_plumbing.replication import MARK_KEY, RETRY_AFTER_SECONDS
from ferret.steps import Batch, Call, Eval, Now, Op, Replicate, Step

T = TypeVar("T")
logger = logging.getLogger(__name__)


class AsyncRedisClock:
    """``ferret.redis_plumbing.clock.RedisClock`` for the event loop: Redis's ``TIME`` read (awaited) at most
    every ``refresh_seconds``, the monotonic clock in between."""

    def __init__(self, client: aredis.Redis, refresh_seconds: float = 30.0) -> None:
        self._client = client
        self._refresh = refresh_seconds
        self._anchor: tuple[float, float] | None = None
        self._next_reading = 0.0

    async def time(self) -> float:
        now = time.monotonic()
        if now >= self._next_reading:
            try:
                before = time.monotonic()
                seconds, micros = await self._client.time()
                after = time.monotonic()
                self._anchor = (int(seconds) + int(micros) / 1e6, (before + after) / 2)
                self._next_reading = after + self._refresh
            except redis.RedisError:
                self._next_reading = now + 1.0  # the last reading goes on
        return self.last()

    def last(self) -> float:
        """The time from the last reading, without a round trip (the host's clock before any)."""
        if self._anchor is None:
            return time.time()
        return self._anchor[0] + (time.monotonic() - self._anchor[1])


class AsyncReplicaWait:
    """``ferret.redis_plumbing.replication.ReplicaWait`` awaited (same mark key, same back-off after a short wait)."""

    def __init__(self, client: aredis.Redis, replicas: int, timeout_ms: int) -> None:
        self.client, self.replicas, self.timeout_ms = client, replicas, timeout_ms
        self._short_until = 0.0

    async def __call__(self, what: str) -> bool:
        if self.replicas <= 0:
            return True
        if time.monotonic() < self._short_until:
            return False
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.incr(MARK_KEY)
            pipe.wait(self.replicas, self.timeout_ms)
            acked = int((await pipe.execute())[1])
        if acked >= self.replicas:
            return True
        self._short_until = time.monotonic() + RETRY_AFTER_SECONDS
        logger.warning("%s reached %d of %d replicas within %d ms: a failover now could lose it",
                       what, acked, self.replicas, self.timeout_ms)
        return False


IN_FLIGHT = 32  # operations in flight at once per runner; the others wait their turn, not a socket each


class AsyncSteps:
    """Runs rules through asyncio clients for ``queue`` and ``store`` (often the same)."""

    def __init__(self, queue: aredis.Redis, store: aredis.Redis, clock: AsyncRedisClock,
                 replicas: AsyncReplicaWait, in_flight: int = IN_FLIGHT) -> None:
        self.clients = {"queue": queue, "store": store}
        self._turns = asyncio.Semaphore(in_flight)
        self.clock = clock
        self.replicas = replicas
        self._scripts: dict[tuple[str, str], AsyncScript] = {}

    async def run(self, rule: Step[T]) -> T:
        reply: Any = None
        error: redis.ResponseError | None = None
        while True:
            try:
                op = rule.throw(error) if error is not None else rule.send(reply)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            reply, error = None, None
            try:
                async with self._turns:
                    reply = await self.do(op)
            except redis.ResponseError as exc:
                error = exc
            except asyncio.CancelledError:
                rule.close()
                raise

    async def do(self, op: Op) -> Any:
        if isinstance(op, Call):
            return await self.clients[op.on].execute_command(*op.args)
        if isinstance(op, Batch):
            async with self.clients[op.on].pipeline(transaction=op.transaction) as pipe:
                for args in op.calls:
                    pipe.execute_command(*args)
                return await pipe.execute()
        if isinstance(op, Eval):
            script = self._scripts.get((op.on, op.source))
            if script is None:
                script = self._scripts[(op.on, op.source)] = self.clients[op.on].register_script(op.source)
            return await script(keys=list(op.keys), args=list(op.args))
        if isinstance(op, Now):
            return await self.clock.time()
        if isinstance(op, Replicate):
            return await self.replicas(op.what)
        raise TypeError(f"not a step: {op!r}")
