"""Every Redis key Ferret uses, in one place.

Namespaces and request ids are validated before they reach a key, and ids
that come from outside are hashed, so no input can name another tenant's
keys. Memory-store keys hold data and have no TTL; every other key has one.

A namespace's memory-store keys (memories, embeddings, version, change log,
snapshot, build lock, co-retrieval weights, Nous node ids) carry the
namespace as a Redis Cluster hash tag (``ferret:ns:{<ns>}:...``): on a
cluster they all live on one shard, so the scripts and transactions that
change several of them stay atomic. (Namespaces hold no braces.) Keys of the
queue Redis (results, traces, cache, request ids) carry no tag.
"""

from __future__ import annotations

import hashlib

PREFIX = "ferret"


def store_tag(namespace: str) -> str:
    """The hash tag every memory-store key of the namespace carries."""
    return f"{{{namespace}}}"


def memories(namespace: str) -> str:
    """Hash: memory id -> memory JSON."""
    return f"{PREFIX}:ns:{{{namespace}}}:memories"


def memory_version(namespace: str) -> str:
    """Counter bumped by every change to the namespace's memories."""
    return f"{PREFIX}:ns:{{{namespace}}}:version"


def nous_node_ids(namespace: str) -> str:
    """Hash: memory id written through Ferret -> the node id its Nous server gave it."""
    return f"{PREFIX}:ns:{{{namespace}}}:nous-nodes"


def embeddings(namespace: str) -> str:
    """Hash: memory id -> its embedding, float32 little-endian (the semantic retriever, local backend)."""
    return f"{PREFIX}:ns:{{{namespace}}}:embeddings"


def changes(namespace: str) -> str:
    """Stream: the namespace's change log, one entry per write (see ferret.worker.backends.change_log)."""
    return f"{PREFIX}:ns:{{{namespace}}}:changes"


def successors(namespace: str) -> str:
    """Hash: the id of each memory another one supersedes -> the id of the one that supersedes it (written
    before the memories themselves; read at each answer, checked against the successor's own ``supersedes``)."""
    return f"{PREFIX}:ns:{{{namespace}}}:successors"


def index_snapshot(namespace: str) -> str:
    """String: the manifest of the namespace's prebuilt index snapshot."""
    return f"{PREFIX}:ns:{{{namespace}}}:index:manifest"


def index_snapshot_chunk(namespace: str, generation: str, number: int) -> str:
    """String: one chunk of a snapshot's bytes."""
    return f"{PREFIX}:ns:{{{namespace}}}:index:{generation}:{number}"


def index_build_lock(namespace: str) -> str:
    """String with a TTL: held by the one process building the namespace's snapshot."""
    return f"{PREFIX}:ns:{{{namespace}}}:index:building"


def request_job(namespace: str, request_id: str) -> str:
    """String: idempotency key, request id -> job id."""
    digest = hashlib.sha256(request_id.encode()).hexdigest()[:32]
    return f"{PREFIX}:ns:{namespace}:request:{digest}"


def cache_index() -> str:
    """Sorted set: every cache entry's key by write time, to hold the cache to its cap."""
    return f"{PREFIX}:cache-index"


def cached(namespace: str, digest: str) -> str:
    """String: a cached retrieval (results, context, stats) for one cache key."""
    return f"{PREFIX}:ns:{namespace}:cache:{digest}"


def affinity(namespace: str, memory_id: str) -> str:
    """Hash: partner memory id -> co-retrieval weight in (0, 1] (local backend)."""
    digest = hashlib.sha256(memory_id.encode()).hexdigest()[:32]
    return f"{PREFIX}:ns:{{{namespace}}}:affinity:{digest}"


def affinity_pattern(namespace: str) -> str:
    """SCAN pattern of every affinity hash of a namespace (namespaces hold no glob characters)."""
    return f"{PREFIX}:ns:{{{namespace}}}:affinity:*"


def result(job_id: str) -> str:
    """String: a job's final result (packed JSON, signed when signing is on), for result TTL seconds."""
    return f"{PREFIX}:result:{job_id}"


def done(job_id: str) -> str:
    """List that gets one token when the result is written (for blocking waits), and the
    channel the writer publishes on at that moment (for waiters sharing one connection)."""
    return f"{PREFIX}:done:{job_id}"


def carried_by(job_id: str) -> str:
    """String: the id of the carrier (``ferret.carriers``) a batch line's job rides in, for as long as its
    claim; RQ's state of the job is the carrier's."""
    return f"{PREFIX}:carried:{job_id}"


def conversation(namespace: str, conversation_id: str) -> str:
    """List: a conversation's latest prefetches, newest first (``ferret.producer.conversations``)."""
    digest = hashlib.sha256(conversation_id.encode()).hexdigest()[:32]
    return f"{PREFIX}:ns:{namespace}:conversation:{digest}"


def superseded_count() -> str:
    """Counter: prefetches a newer one of their conversation took off the queue."""
    return f"{PREFIX}:superseded"


def trace(trace_id: str) -> str:
    """String: a job's trace (its spans as packed JSON), for trace TTL seconds."""
    return f"{PREFIX}:trace:{trace_id}"


def breaker(endpoint_digest: str, part: str) -> str:
    """An outside endpoint's circuit breaker state (``ferret.breaker``): failures, open, probation."""
    return f"{PREFIX}:breaker:{endpoint_digest}:{part}"


def refusal_log() -> str:
    """List: the newest refused queue entries (JSON: when, queue, job id, reason, message, worker), capped."""
    return f"{PREFIX}:refused"


def refusal(job_id: str) -> str:
    """String: why the workers refused a job (JSON: reason, message, the refused payload's trace id), for the
    prefetch result TTL. Its producer reads it once the job is gone with no result, and takes it as the job's end
    only when the trace id is its own (an entry anyone wrote cannot end another request)."""
    return f"{PREFIX}:refusal:{job_id}"


def store_identity() -> str:
    """String (in the memory store, no TTL): the store's identity, a random token written once."""
    return f"{PREFIX}:store-identity"


def store_binding() -> str:
    """String (in the queue Redis): the identity of the memory store this queue's workers read; renewed by
    serving workers, it lapses a minute after the last one stops."""
    return f"{PREFIX}:store-binding"


def store_mismatches() -> str:
    """Counter (in the queue Redis): workers that refused to start because their store was another."""
    return f"{PREFIX}:store-mismatches"


def api_key(key_id: str) -> str:
    """Hash (in the queue Redis, no TTL): an HTTP API key's record: the SHA-256 of the key (never the key),
    its namespaces, read-only flag, rate, label, creation time and, once revoked, when (``ferret.serve.api_keys``)."""
    return f"{PREFIX}:api-key:{key_id}"


def api_key_ids() -> str:
    """Set (in the queue Redis): the ids of every HTTP API key, for ``ferret keys list``."""
    return f"{PREFIX}:api-keys"


def rate_limit_prefix() -> str:
    """Key prefix of the HTTP API's per-key request counters (fixed windows kept by the ``limits`` library,
    each expiring with its window)."""
    return f"{PREFIX}:rate"
