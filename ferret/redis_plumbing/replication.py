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

import redis

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 60.0
MARK_KEY = "ferret:replication:mark"
RETRY_AFTER_SECONDS = 5.0


class ReplicaWait:
    def __init__(self, client: redis.Redis, replicas: int, timeout_ms: int,
                 shared: Synchronized[float] | None = None) -> None:
        self.client = client
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self._warned_at = -WARN_EVERY_SECONDS
        # Monotonic time until which writes do not wait (the last wait fell short); shared memory,
        # so a forked child's short wait is seen by its parent and the next child.
        self._short_until = shared if shared is not None else multiprocessing.Value("d", 0.0)

    def for_client(self, client: redis.Redis) -> ReplicaWait:
        """The same waits through ``client`` (a forked child's), sharing the state."""
        return ReplicaWait(client, self.replicas, self.timeout_ms, self._short_until)

    def __call__(self, what: str) -> bool:
        """Wait until every write made before now is on enough replicas; False if it is not."""
        if self.replicas <= 0:
            return True
        if time.monotonic() < self._short_until.value:
            return False
        with self.client.pipeline(transaction=False) as pipe:
            pipe.incr(MARK_KEY)
            pipe.wait(self.replicas, self.timeout_ms)
            acked = int(pipe.execute()[1])
        if acked >= self.replicas:
            return True
        now = time.monotonic()
        self._short_until.value = now + RETRY_AFTER_SECONDS
        if now - self._warned_at >= WARN_EVERY_SECONDS:
            self._warned_at = now
            logger.warning("%s reached %d of %d replicas within %d ms: a failover now could lose it; writes "
                           "do not wait for replicas for the next %.0f s", what, acked, self.replicas,
                           self.timeout_ms, RETRY_AFTER_SECONDS)
        return False

