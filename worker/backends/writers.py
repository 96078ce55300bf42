"""Writing memories through Ferret, whatever the backend.

``local``: the namespace's store in Redis (``MemoryStore``), whose version
counter moves in the same transaction as the write. ``nous``: nodes put to
and deleted from the namespace's Nous server, then the same counter is
bumped, so every cached answer for the namespace is passed over at once
(writes made to a Nous server directly are seen within
``cache.remote_staleness_seconds``). A Nous server names its nodes itself, so
the writer keeps which node each memory id became (``keys.nous_node_ids``):
writing the same memory id again updates that node, and forgetting the memory
id deletes it; an id Ferret never wrote is taken as the server's node id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import redis

from ferret import keys
from ferret.errors import NamespaceNotServed
from ferret.records import Memory
from ferret.settings import Settings
from ferret.worker.backends.local import MemoryStore


class MemoryWriter(Protocol):
    def upsert(self, memories: Iterable[Memory]) -> int: ...

    def delete(self, ids: Iterable[str]) -> int: ...


class NousWriter:
    """Puts and deletes nodes on the namespace's Nous server, then bumps its counter."""

    def __init__(self, settings: Settings, client: redis.Redis, namespace: str) -> None:
        from ferret.worker.backends.nous import NAME, NousBackend  # its HTTP client, for a Nous namespace only

        url = settings.backend.nous.url_for(namespace)
        if url is None:
            raise NamespaceNotServed(NAME, f"no Nous server for namespace {namespace!r}")
        self._nous = NousBackend(settings.backend.nous.model_copy(update={"base_url": url}))
        self._client = client
        self._namespace = namespace

    def _bump(self) -> None:
        self._client.incr(keys.memory_version(self._namespace))

    def _node_id(self, memory_id: str) -> str | None:
        value = self._client.hget(keys.nous_node_ids(self._namespace), memory_id)
        return value.decode(errors="replace") if isinstance(value, bytes) else value

    def upsert(self, memories: Iterable[Memory]) -> int:
        written = 0
        ids = keys.nous_node_ids(self._namespace)
        try:
            for memory in memories:
                node_id = self._node_id(memory.id)
                if node_id is None or self._nous.patch_node(node_id, memory) is None:
                    stored = self._nous.put_node(memory)
                    self._client.hset(ids, memory.id, stored.id)
                written += 1
        finally:
            if written:
                self._bump()
        return written

    def delete(self, ids: Iterable[str]) -> int:
        removed = 0
        names = keys.nous_node_ids(self._namespace)
        try:
            for memory_id in ids:
                node_id = self._node_id(memory_id)
                removed += self._nous.delete_node(node_id or memory_id)
                if node_id is not None:
                    self._client.hdel(names, memory_id)
        finally:
            self._bump()
        return removed

    def close(self) -> None:
        self._nous.close()


def writer_for(settings: Settings, store: redis.Redis, namespace: str) -> MemoryWriter:
    """``store``: the memory store's client (``ferret.redis_plumbing.store_conn.store_client``)."""
    if settings.backend.kind == "nous":
        return NousWriter(settings, store, namespace)
    local = settings.backend.local
    embedder = None
    if settings.semantic.enabled:  # numpy and the embedder's client, for a semantic retriever only
        from ferret.worker.semantic.embedders import embedder_for

        embedder = embedder_for(settings.semantic)
    return MemoryStore(store, namespace, local.change_log_length, embedder,
                       local.store_min_replicas_acked, local.store_replica_ack_timeout_ms)
