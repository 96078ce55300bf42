"""The ``local`` backend: memories in Redis, a lexical index in each process.

``MemoryStore`` writes and reads a namespace's memories (a hash of JSON plus
a version counter bumped in the same transaction). ``IndexCache`` keeps one
``LexicalIndex`` per namespace in the process and rebuilds it when the
store's version moves. A job may carry the version the producer saw at
enqueue time: an index at least that new is used without asking Redis, so a
job always sees every memory write that finished before it was enqueued.
``LocalBackend`` is bound to one namespace and one version for the length of
a job, so a job sees one consistent snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import redis

from ferret import keys
from ferret.errors import BackendUnavailable
from ferret.records import Filters, Hit, Memory
from ferret.settings import CoRetrievalSettings
from worker.backends.base import Backend
from worker.backends.filtering import predicate
from worker.backends.lexical_index import LexicalIndex
from worker.co_retrieval.affinity import AffinityBackend, RedisAffinity


class MemoryStore:
    """Add, update, delete and list a namespace's memories in Redis."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def upsert(self, memories: Iterable[Memory]) -> int:
        mapping: dict[Any, Any] = {m.id: m.model_dump_json() for m in memories}
        if not mapping:
            return 0
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(keys.memories(self.namespace), mapping=mapping)
            pipe.incr(keys.memory_version(self.namespace))
            pipe.execute()
        return len(mapping)

    def delete(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        if not ids:
            return 0
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hdel(keys.memories(self.namespace), *ids)
            pipe.incr(keys.memory_version(self.namespace))
            removed, _ = pipe.execute()
        return int(removed)

    def clear(self) -> None:
        """Drop every memory of the namespace, and their co-retrieval weights."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(keys.memories(self.namespace))
            pipe.incr(keys.memory_version(self.namespace))
            pipe.execute()
        stale = list(self.client.scan_iter(match=keys.affinity_pattern(self.namespace), count=1000))
        for start in range(0, len(stale), 500):
            self.client.delete(*stale[start:start + 500])

    def version(self) -> int:
        return int(self.client.get(keys.memory_version(self.namespace)) or 0)

    def count(self) -> int:
        return int(self.client.hlen(keys.memories(self.namespace)))

    def snapshot(self) -> tuple[int, list[Memory]]:
        """Version and memories, read in one transaction."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(keys.memory_version(self.namespace))
            pipe.hgetall(keys.memories(self.namespace))
            version, raw = pipe.execute()
        memories = [Memory.model_validate_json(v) for _, v in sorted(raw.items())]
        return int(version or 0), memories


class IndexCache:
    """One lexical index per namespace per process, following store versions."""

    def __init__(self) -> None:
        self._indexes: dict[str, tuple[int, LexicalIndex]] = {}
        self._lock = threading.Lock()
        self.rebuilds = 0

    def index_for(self, store: MemoryStore, at_least: int | None = None) -> tuple[int, LexicalIndex]:
        """The namespace's index; no Redis call when it is at least ``at_least``."""
        cached = self._indexes.get(store.namespace)
        if cached and at_least is not None and cached[0] >= at_least:
            return cached
        try:
            version = store.version()
            if cached and cached[0] == version:
                return cached
            with self._lock:
                cached = self._indexes.get(store.namespace)
                if cached and cached[0] == version:
                    return cached
                version, memories = store.snapshot()
                built = (version, LexicalIndex(memories))
                self._indexes[store.namespace] = built
                self.rebuilds += 1
                return built
        except redis.RedisError as exc:
            raise BackendUnavailable("local", f"memory store unreachable: {exc}") from exc


class LocalBackend:
    """Search one namespace's memories; built per job by ``LocalBackends``."""

    name = "local"

    def __init__(self, index: LexicalIndex, version: int) -> None:
        self._index = index
        self.version = version

    def search(
        self, query: str, limit: int, filters: Filters, timeout: float | None = None
    ) -> list[Hit]:
        return self._index.search(query, limit, predicate(filters))

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None


class LocalBackends:
    """Per-process factory: ``for_namespace(ns)`` gives a job its backend.

    With co-retrieval on and a positive ``affinity_weight``, the backend's hits
    get the co-retrieval bonus (see ``worker.co_retrieval.affinity``).
    """

    def __init__(self, client: redis.Redis, co_retrieval: CoRetrievalSettings | None = None) -> None:
        self.client = client
        self.cache = IndexCache()
        settings = co_retrieval or CoRetrievalSettings()
        self.affinity_weight = settings.affinity_weight if settings.enabled else 0.0
        self.affinity_seeds = settings.affinity_seeds

    def for_namespace(self, namespace: str, at_least: int | None = None) -> Backend:
        version, index = self.cache.index_for(MemoryStore(self.client, namespace), at_least)
        backend = LocalBackend(index, version)
        if self.affinity_weight <= 0:
            return backend
        return AffinityBackend(backend, RedisAffinity(self.client, namespace), self.affinity_weight,
                               self.affinity_seeds)

    def version(self, namespace: str) -> int:
        return MemoryStore(self.client, namespace).version()

    def close(self) -> None:
        return None

