"""The ``local`` backend: memories in Redis, a tantivy index per namespace in each worker.

``MemoryStore`` writes and reads a namespace's memories: a hash of JSON, a
version counter and the change log, all changed by one script
(``ferret.worker.backends.change_log``). ``LocalBackends`` keeps each namespace's
index in an ``IndexRegistry`` that follows the change log, so a write of k
memories costs O(k) in every worker; cold workers load a prebuilt snapshot.
A job may carry the version the producer saw at enqueue time: an index at
least that new is used without asking Redis, so a job always sees every
memory write that finished before it was enqueued. ``LocalBackend`` is
bound to one namespace for the length of a job; its hits' memories are read
from the hash (one round trip a search), so what a search returns is always
what is stored.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from ferret import keys
from ferret.errors import BackendProtocolError, BackendUnavailable
from ferret.records import Filters, Hit, Memory
from ferret.redis_plumbing.pids import pid_alive
from ferret.redis_plumbing.redis_conn import url_of
from ferret.settings import CoRetrievalSettings, LocalSettings
from ferret.steps import Call, Step
from ferret.worker.backends.base import Backend
from ferret.worker.backends.change_log import ChangeLog, write_step
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.linking import linked_hits, neighbour_scores
from ferret.worker.backends.word_family import word_family_search
from ferret.worker.co_retrieval.affinity import AffinityBackend, RedisAffinity
from ferret.worker.pipeline.supersession import MAX_CHAIN, superseded_ids

if TYPE_CHECKING:  # the search engine, imported by what searches: a process that only writes memories
    # (an agent's ``remember``, ``ferret ingest``) does not load tantivy, numpy or an HTTP client
    from ferret.worker.backends.index_registry import IndexRegistry, Readiness
    from ferret.worker.backends.tantivy_index import MemoryIndex
    from ferret.worker.semantic.embedders import Embedder

# Memories per write script (a Lua call's arguments are bounded).
WRITE_BATCH = 1000


logger = logging.getLogger(__name__)


def write_batches(memories: Iterable[Memory]) -> Iterator[dict[str, Memory]]:
    """Memories by id, ``WRITE_BATCH`` ids a write (a later one of the same id in a batch replaces it)."""
    batch: dict[str, Memory] = {}
    for memory in memories:
        batch[memory.id] = memory
        if len(batch) >= WRITE_BATCH:
            yield batch
            batch = {}
    if batch:
        yield batch


def upsert_step(namespace: str, memories: Iterable[Memory], change_log_length: int) -> Step[int]:
    """``MemoryStore.upsert`` with no embedder and no replicas, as a ``ferret.steps`` rule: the same writes,
    sent by whatever runs the rule (the asyncio client, on its loop); how many memories."""
    written = 0
    for batch in write_batches(memories):
        ids = list(batch)
        replaced = superseded_ids(list(batch.values()))
        if replaced:  # before the memories: an answer never sees a successor the map does not name yet
            yield Call(("HSET", keys.successors(namespace), *itertools.chain.from_iterable(replaced.items())),
                       on="store")
        yield from write_step(namespace, change_log_length, "upsert", ids, [batch[i].model_dump_json() for i in ids])
        written += len(ids)
    return written


class MemoryStore:
    """Add, update, delete and list a namespace's memories in Redis."""

    def __init__(self, client: redis.Redis, namespace: str, change_log_length: int = 10_000,
                 embedder: Embedder | None = None, replicas: int = 0, replica_timeout_ms: int = 1000) -> None:
        """``embedder``: the semantic retriever's; every memory written is embedded with it
        and its embedding kept with it, in the same write. ``replicas``: a write returns
        once that many replicas have it (see ``ferret.worker.backends.change_log``)."""
        self.client = client
        self.namespace = namespace
        self.log = ChangeLog(client, namespace, change_log_length, replicas, replica_timeout_ms)
        self.embedder = embedder

    def upsert(self, memories: Iterable[Memory]) -> int:
        return sum(self._write(batch) for batch in write_batches(memories))

    def _write(self, batch: dict[str, Memory]) -> int:
        ids = list(batch)
        replaced = superseded_ids(list(batch.values()))
        if replaced:  # before the memories (see ``successors``)
            pairs = list(itertools.chain.from_iterable(replaced.items()))
            self.client.hset(keys.successors(self.namespace), items=pairs)
        embeddings = None
        if self.embedder is not None:
            vectors = self.embedder.embed([batch[i].text for i in ids])
            embeddings = [row.astype("<f4").tobytes() for row in vectors]
        self.log.write("upsert", ids, [batch[i].model_dump_json() for i in ids], embeddings)
        return len(ids)

    def delete(self, ids: Iterable[str]) -> int:
        ids = list(dict.fromkeys(ids))
        removed = 0
        for start in range(0, len(ids), WRITE_BATCH):
            removed += self.log.write("delete", ids[start:start + WRITE_BATCH])[1]
        return removed

    def clear(self) -> None:
        """Drop every memory of the namespace, and their co-retrieval weights."""
        self.log.write("clear", [])
        stale = list(self.client.scan_iter(match=keys.affinity_pattern(self.namespace), count=1000))
        for start in range(0, len(stale), 500):
            self.client.delete(*stale[start:start + 500])

    def version(self) -> int:
        return int(self.client.get(keys.memory_version(self.namespace)) or 0)

    def count(self) -> int:
        return int(self.client.hlen(keys.memories(self.namespace)))


class LocalBackend:
    """Search one namespace's index; built per job by ``LocalBackends``."""

    name = "local"
    widens = True
    retrievers: tuple[str, ...] = ("lexical", "graph")  # graph: the co-retrieval weights; semantic with an embedder

    def __init__(self, client: redis.Redis, namespace: str, index: MemoryIndex, version: int,
                 readiness: Readiness | None = None, registry: IndexRegistry | None = None,
                 embedder: Embedder | None = None) -> None:
        self._client = client
        self._namespace = namespace
        self._index = index
        self.version = version
        self.readiness = readiness
        self._registry = registry
        self._embedder = embedder
        if registry is not None and embedder is not None:
            self.retrievers = ("lexical", "graph", "semantic")

    def similar(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        """The memories whose embeddings are nearest the query's (one embeddings call, one read)."""
        if self._registry is None or self._embedder is None:
            return []
        from ferret.worker.semantic.vectors import DimensionMismatch

        vector = self._embedder.embed([query], timeout)
        try:
            found = self._registry.nearest(self._namespace, vector, limit * 2)  # filters may drop some
        except DimensionMismatch as exc:
            where = getattr(self._embedder, "where", self._embedder.name)
            raise BackendProtocolError("embeddings", f"{where} answered {exc.query}-dimension vectors, but the "
                                                     f"namespace's stored embeddings have {exc.index} (did "
                                                     "semantic.model change? ferret ingest embeds anew)") from None
        if not found:
            return []
        memories = self._read([memory_id for memory_id, _ in found])
        return [Hit.of(memories[memory_id], score) for memory_id, score in found
                if memory_id in memories and matches(memories[memory_id], filters)][:limit]

    def search(
        self, query: str, limit: int, filters: Filters, timeout: float | None = None
    ) -> list[Hit]:
        return self._hits(self._index.search(query, limit, filters), filters)

    def widened(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        """The words that begin with the query's words (``word_family``): for a search that found nothing."""
        return self._hits(word_family_search(self._index, self._read, query, limit, filters), filters)

    def _hits(self, pairs: list[tuple[str, float]], filters: Filters) -> list[Hit]:
        """The index's (id, score) pairs as hits, each memory as the store holds it (and still passing)."""
        if not pairs:
            return []
        memories = self._read([memory_id for memory_id, _ in pairs])
        return [Hit.of(memories[memory_id], score) for memory_id, score in pairs
                if memory_id in memories and matches(memories[memory_id], filters)]

    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters,
               timeout: float | None = None) -> list[Hit]:
        """Memories linked to the seeds by co-retrieval weights (two round trips)."""
        if not seeds:
            return []
        links = RedisAffinity(self._client, self._namespace).weights([s.id for s in seeds])
        return linked_hits(neighbour_scores(seeds, links), limit, filters, self._read)

    def successors(self, ids: Sequence[str]) -> dict[str, Memory]:
        """For each of ``ids`` another memory supersedes, that memory (following chains, each link checked
        against the successor's own ``supersedes``): ``worker.pipeline.supersession``. One read when none is."""
        found: dict[str, Memory] = {}
        asking = list(dict.fromkeys(ids))
        asked = set(asking)
        for _ in range(MAX_CHAIN):
            if not asking:
                break
            try:
                named = self._client.hmget(keys.successors(self._namespace), asking)
            except redis.RedisError as exc:
                raise BackendUnavailable("local", f"memory store unreachable: {exc}") from exc
            links = {old: (new.decode() if isinstance(new, bytes) else str(new))
                     for old, new in zip(asking, named, strict=True) if new is not None}
            memories = self._read(list(dict.fromkeys(links.values()))) if links else {}
            asking = []
            for old, new in links.items():
                successor = memories.get(new)
                if successor is not None and old in successor.supersedes:
                    found[old] = successor
                    if new not in asked:
                        asked.add(new)
                        asking.append(new)
        return found

    def _read(self, ids: list[str]) -> dict[str, Memory]:
        """The memories of ``ids``: held by the worker when it can (``HeldMemories``), else read."""
        if self._registry is not None:
            return self._registry.memories(self._namespace, ids, self._read_store)
        return self._read_store(ids)

    def _read_store(self, ids: list[str]) -> dict[str, Memory]:
        try:
            raw = self._client.hmget(keys.memories(self._namespace), ids)
        except redis.RedisError as exc:
            raise BackendUnavailable("local", f"memory store unreachable: {exc}") from exc
        from ferret.worker.backends.index_entry import parse_memories

        found, _ = parse_memories(raw, ids)
        return {m.id: m for m in found}

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None


INDEX_DIR_PREFIX = "ferret-index-"


SHARED_MEMORY = Path("/dev/shm")


def _index_base(settings: LocalSettings) -> Path:
    """``index_dir``, else /dev/shm when it is there with room for twice the
    bound (a commit's fsync is free on tmpfs: measured, apply-one-and-search
    at 10k memories 5.8 ms there against 10.4 ms on the disk), else the temp dir.
    Files there are memory either way, and count against the bound."""
    if settings.index_dir:
        return Path(settings.index_dir)
    with contextlib.suppress(OSError):
        room = shutil.disk_usage(SHARED_MEMORY).free
        if os.access(SHARED_MEMORY, os.W_OK) and room >= 2 * settings.index_memory_mb * 1024 * 1024:
            return SHARED_MEMORY
    return Path(tempfile.gettempdir())


def default_index_root(settings: LocalSettings) -> Path:
    """This worker's index directory (see ``_index_base``); the directories of
    this host's workers that are gone are removed on the way."""
    base = _index_base(settings)
    host = socket.gethostname()
    with contextlib.suppress(OSError):
        for stale in base.glob(f"{INDEX_DIR_PREFIX}{host}-*-*"):
            pid = stale.name.rsplit("-", 2)[-2]
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
    return base / f"{INDEX_DIR_PREFIX}{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class LocalBackends:
    """Per-process factory: ``for_namespace(ns)`` gives a job its backend.

    With co-retrieval on and a positive ``affinity_weight``, the backend's hits
    get the co-retrieval bonus (see ``ferret.worker.co_retrieval.affinity``).
    """

    def __init__(self, client: redis.Redis, co_retrieval: CoRetrievalSettings | None = None,
                 local: LocalSettings | None = None, index_root: Path | None = None,
                 store_url: str | None = None, embedder: Embedder | None = None) -> None:
        """``client`` and ``store_url``: the memory store's (a builder process is
        given the URL)."""
        from ferret.worker.backends.index_registry import IndexRegistry

        self.client = client
        self.embedder = embedder
        self.local = local or LocalSettings()
        self._owns_root = index_root is None
        self.index_root = index_root or default_index_root(self.local)
        self.registry = IndexRegistry(client, self.local, self.index_root,
                                      {"FERRET_BACKEND__LOCAL__STORE_URL": store_url or url_of(client)})
        settings = co_retrieval or CoRetrievalSettings()
        self.affinity_weight = settings.affinity_weight if settings.enabled else 0.0
        self.affinity_seeds = settings.affinity_seeds

    def for_namespace(self, namespace: str, at_least: int | None = None,
                      wait_seconds: float | None = None) -> Backend:
        wait = self.local.build_wait_seconds if wait_seconds is None else min(wait_seconds,
                                                                              self.local.build_wait_seconds)
        position, index, readiness = self.registry.index_for(namespace, at_least, max(0.0, wait))
        backend = LocalBackend(self.client, namespace, index, position.version, readiness, self.registry,
                               self.embedder)
        if self.affinity_weight <= 0:
            return backend
        wrapped = AffinityBackend(backend, RedisAffinity(self.client, namespace), self.affinity_weight,
                                  self.affinity_seeds)
        wrapped.readiness = readiness  # type: ignore[attr-defined]
        return wrapped

    def version(self, namespace: str) -> int:
        return MemoryStore(self.client, namespace).version()

    def after_job(self) -> tuple[int, float, int]:
        """Commit staged writes that are due (``IndexRegistry.fold_due``), once a job's result is written:
        how many changes, the milliseconds it took, and how many of the folds were a peer's, taken."""
        folded, took, taken = self.registry.fold_due()
        if folded:
            logger.debug("committed %d staged change(s) in %.1f ms after the job", folded, took)
        return folded, took, taken

    def close(self) -> None:
        self.registry.close()
        if self._owns_root:
            shutil.rmtree(self.index_root, ignore_errors=True)
