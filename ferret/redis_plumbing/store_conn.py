"""The Redis that holds the memories: the queue Redis, or ``backend.local.store_url``.

The local backend's memory store (memories, embeddings, version, change
log, snapshots, co-retrieval weights) may live apart from the queues,
results and traces: on another Redis, on a Sentinel-watched one, or on a
Redis Cluster (``redis+cluster://``), where every key of one namespace
shares a hash tag (``ferret.keys``) and so one shard. Unset, the store is
the queue Redis (one client for both). The Nous backend keeps only its
version counters and node ids, on the queue Redis.
"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from ferret.redis_plumbing.redis_conn import client_for
from ferret.settings import Settings


def separate_store_url(settings: Settings) -> str | None:
    """The store's own URL, or None when the store is the queue Redis."""
    if settings.backend.kind != "local":
        return None
    return settings.backend.local.store_url or None


def store_client(settings: Settings, queue_client: redis.Redis) -> redis.Redis:
    """A client for the memory store: ``queue_client`` itself unless the store is elsewhere."""
    url = separate_store_url(settings)
    return client_for(url) if url else queue_client


def is_cluster(client: redis.Redis) -> bool:
    return isinstance(client, RedisCluster)


def node_for(client: redis.Redis, key: str) -> redis.Redis:
    """A plain client for the one server that holds ``key``: ``client`` itself,
    or on a cluster the primary of the key's slot (as the cluster client knows it)."""
    if isinstance(client, RedisCluster):
        node = client.get_node_from_key(key)
        connection = client.get_redis_connection(node)
        assert connection is not None
        return connection
    return client


def refresh_topology(client: redis.Redis) -> None:
    """Ask the cluster again which node serves which slots (after a failover)."""
    if isinstance(client, RedisCluster):
        client.nodes_manager.initialize()


FULL_COVERAGE_WARNING = (
    "the memory store's Redis Cluster has cluster-require-full-coverage yes (Redis's default): while one shard "
    "fails over, every shard refuses every command, so every tenant's jobs and writes fail, not only that "
    "shard's. Set it to no on every node (CONFIG SET cluster-require-full-coverage no, and in redis.conf)")


def full_coverage_required(client: redis.Redis) -> bool | None:
    """On a cluster store, whether any primary stops serving when a slot is uncovered (True: the whole
    cluster goes down with one shard); None when not a cluster or CONFIG is not allowed (managed clusters)."""
    if not isinstance(client, RedisCluster):
        return None
    try:
        answers = client.config_get("cluster-require-full-coverage", target_nodes=RedisCluster.PRIMARIES)
    except redis.RedisError:
        return None
    values = answers.values() if isinstance(answers, dict) and all(isinstance(v, dict) for v in answers.values()) \
        else [answers]
    seen = [str(v.get("cluster-require-full-coverage", "")).lower() for v in values if isinstance(v, dict)]
    return any(value == "yes" for value in seen) if seen else None
