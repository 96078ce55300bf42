"""Run ``ferret.steps`` rules with a blocking redis-py client."""

from __future__ import annotations

from typing import Any, TypeVar

import redis
from redis.commands.core import Script

from ferret.redis_plumbing.clock import Clock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.steps import Batch, Call, Eval, Now, Op, Replicate, Step, drive

T = TypeVar("T")


class SyncSteps:
    """Runs rules through ``queue`` (and ``store``, the memory store's client, often the same)."""

    def __init__(self, queue: redis.Redis, store: redis.Redis, clock: Clock, replicas: ReplicaWait) -> None:
        self.clients = {"queue": queue, "store": store}
        self.clock = clock
        self.replicas = replicas
        self._scripts: dict[tuple[str, str], Script] = {}

    def run(self, rule: Step[T]) -> T:
        return drive(rule, self.do, (redis.ResponseError,))

    def do(self, op: Op) -> Any:
        if isinstance(op, Call):
            return self.clients[op.on].execute_command(*op.args)
        if isinstance(op, Batch):
            with self.clients[op.on].pipeline(transaction=op.transaction) as pipe:
                for args in op.calls:
                    pipe.execute_command(*args)
                return pipe.execute()
        if isinstance(op, Eval):
            script = self._scripts.get((op.on, op.source))
            if script is None:
                script = self._scripts[(op.on, op.source)] = self.clients[op.on].register_script(op.source)
            return script(keys=list(op.keys), args=list(op.args))
        if isinstance(op, Now):
            return self.clock.time()
        if isinstance(op, Replicate):
            return self.replicas(op.what)
        raise TypeError(f"not a step: {op!r}")
