"""Run ``ferret.steps`` rules with redis-py's asyncio client: the loop is never blocked."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

import redis
import redis.asyncio as aredis
from redis.commands.core import AsyncScript

from ferret.redis_plumbing.clock import AsyncRedisClock
from ferret.redis_plumbing.replication import AsyncReplicaWait
from ferret.steps import Batch, Call, Eval, Now, Op, Replicate, Step

T = TypeVar("T")
logger = logging.getLogger(__name__)


async def drive_async(rule: Generator[Any, Any, T], do: Callable[[Any], Awaitable[Any]],
                      thrown: tuple[type[BaseException], ...]) -> T:
    """``ferret.steps.drive`` with an awaited ``do``: a cancelled wait closes the rule."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            asked = rule.throw(error) if error is not None else rule.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = await do(asked)
        except thrown as exc:
            error = exc
        except asyncio.CancelledError:
            rule.close()
            raise


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
        return await drive_async(rule, self._in_turn, (redis.ResponseError,))

    async def _in_turn(self, op: Op) -> Any:
        async with self._turns:
            return await self.do(op)

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
