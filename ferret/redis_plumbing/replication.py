"""Writes that must outlive a failover: ``WAIT`` for the replicas.

Redis replicates asynchronously: a write the primary acknowledged may not
have reached any replica when the primary dies, and the replica promoted in
its place never had it. With ``redis.min_replicas_acked`` > 0, an enqueue and
a result write are followed by ``WAIT n timeout``: the caller goes on only
once ``n`` replicas have the write, or the timeout passed (then a warning,
at most once a minute: the write is at risk until a replica catches up).
After a wait that fell short, writes do not wait for ``RETRY_AFTER_SECONDS``
(5 s), then try again: a primary with no replica left (the one promoted
after a failover, until the old primary rejoins as its replica) would
otherwise make every write wait the whole timeout, and there is no replica
to lose the write to until one comes back and copies everything. That
state is in memory shared with forked children (a forking worker's work
horses), so one short wait spares the jobs after it.

``WAIT`` counts the writes of the connection it is sent on, and a pooled
client may have written on another one. So the wait is sent after a tiny
write of its own (``INCR`` of one counter) on one connection: replication is
in order, so once a replica has that write it has every write made before it,
on any connection.
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from multiprocessing.sharedctypes import Synchronized
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    import redis.asyncio as aredis

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 60.0
MARK_KEY = "ferret:replication:mark"
RETRY_AFTER_SECONDS = 5.0


class ReplicaPolicy:
    """The rule of the replica wait, with no I/O: whether a write waits at all, the commands of the wait, and
    what their replies make of it (the back-off after a short wait, the warning at most once a minute).
    ``ReplicaWait`` (blocking) and ``AsyncReplicaWait`` (asyncio) only send the commands.

    ``short_until``: monotonic time until which writes do not wait (the last wait fell short); in shared
    memory, so a forked child's short wait is seen by its parent and the next child."""

    def __init__(self, replicas: int, timeout_ms: int, short_until: Synchronized[float] | None = None) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.short_until = short_until if short_until is not None else multiprocessing.Value("d", 0.0)
        self._warned_at = -WARN_EVERY_SECONDS

    def waits(self, monotonic: float) -> bool | None:
        """None: send ``commands()`` and judge the replies; else the answer without a wait."""
        if self.replicas <= 0:
            return True
        if monotonic < self.short_until.value:
            return False
        return None

    def commands(self) -> tuple[tuple[Any, ...], ...]:
        """A tiny write of the wait's own, then ``WAIT`` on the same connection (a pipeline, no transaction)."""
        return (("INCR", MARK_KEY), ("WAIT", self.replicas, self.timeout_ms))

    def judge(self, replies: list[Any], what: str, monotonic: float) -> bool:
        """Whether enough replicas had the writes; a short wait starts the back-off and (at most once a
        minute) says so."""
        acked = int(replies[1])
        if acked >= self.replicas:
            return True
        self.short_until.value = monotonic + RETRY_AFTER_SECONDS
        if monotonic - self._warned_at >= WARN_EVERY_SECONDS:
            self._warned_at = monotonic
            logger.warning("%s reached %d of %d replicas within %d ms: a failover now could lose it; writes "
                           "do not wait for replicas for the next %.0f s", what, acked, self.replicas,
                           self.timeout_ms, RETRY_AFTER_SECONDS)
        return False


class ReplicaWait:
    """``ReplicaPolicy``'s wait through a blocking client."""

    def __init__(self, client: redis.Redis, replicas: int, timeout_ms: int,
                 shared: Synchronized[float] | None = None, policy: ReplicaPolicy | None = None) -> None:
        self.client = client
        self.policy = policy if policy is not None else ReplicaPolicy(replicas, timeout_ms, shared)

    def for_client(self, client: redis.Redis) -> ReplicaWait:
        """The same waits through ``client`` (a forked child's), sharing the state."""
        return ReplicaWait(client, 0, 0, policy=self.policy)

    def __call__(self, what: str) -> bool:
        """Wait until every write made before now is on enough replicas; False if it is not."""
        answer = self.policy.waits(time.monotonic())
        if answer is not None:
            return answer
        with self.client.pipeline(transaction=False) as pipe:
            for command in self.policy.commands():
                pipe.execute_command(*command)
            replies = pipe.execute()
        return self.policy.judge(replies, what, time.monotonic())


class AsyncReplicaWait:
    """``ReplicaPolicy``'s wait through an asyncio client."""

    def __init__(self, client: aredis.Redis, replicas: int, timeout_ms: int) -> None:
        self.client = client
        self.policy = ReplicaPolicy(replicas, timeout_ms)

    async def __call__(self, what: str) -> bool:
        answer = self.policy.waits(time.monotonic())
        if answer is not None:
            return answer
        async with self.client.pipeline(transaction=False) as pipe:
            for command in self.policy.commands():
                pipe.execute_command(*command)
            replies = await pipe.execute()
        return self.policy.judge(replies, what, time.monotonic())
