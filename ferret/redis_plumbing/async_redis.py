"""Asyncio Redis clients for the URLs ``ferret.redis_plumbing.redis_conn`` takes.

Plain (``redis://``, ``rediss://``, ``unix://``) and Sentinel
(``redis+sentinel://``) URLs give a ``redis.asyncio.Redis``; a plain one's
pool is bounded (past ``max_connections`` a command waits for a free
connection instead of opening another), and ``ferret.steps_async`` bounds
the commands in flight for any client, so a thousand coroutines on one loop
share a few sockets. A
cluster URL (``redis+cluster://``, for the memory store only) gives
``redis.asyncio.cluster.RedisCluster``. Connection faults are retried with
backoff for about ten seconds, as the blocking client does.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError, TimeoutError

from ferret.errors import ConfigError
from ferret.redis_plumbing.redis_conn import (
    is_cluster_url,
    is_sentinel_url,
    parse_cluster_url,
    parse_sentinel_url,
    redacted,
)
from ferret.redis_plumbing.redis_retry import RECONNECT_ATTEMPTS

MAX_CONNECTIONS = 64  # above ferret.steps_async's commands in flight: room for pub/sub and the clock


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=2.0, base=0.05), RECONNECT_ATTEMPTS, (ConnectionError, TimeoutError))


def async_client_for(url: str, max_connections: int = MAX_CONNECTIONS) -> aredis.Redis:
    """An asyncio client for ``url`` (raw bytes, as the blocking one)."""
    try:
        if is_cluster_url(url):
            address = parse_cluster_url(url)
            return cast(aredis.Redis, RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in address.nodes], username=address.username,
                password=address.password, ssl=address.ssl, retry=_retry(), max_connections=max_connections))
        if is_sentinel_url(url):
            sentinel_address = parse_sentinel_url(url)
            sentinel_kwargs: dict[str, Any] = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
            if sentinel_address.sentinel_password:
                sentinel_kwargs["password"] = sentinel_address.sentinel_password
            sentinel = Sentinel(list(sentinel_address.sentinels), sentinel_kwargs=sentinel_kwargs)
            return sentinel.master_for(sentinel_address.service, db=sentinel_address.db,
                                       username=sentinel_address.username, password=sentinel_address.password,
                                       ssl=sentinel_address.ssl, retry=_retry(), health_check_interval=30)
        pool = aredis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=None,
                                                      retry=_retry(), health_check_interval=30)
        return aredis.Redis(connection_pool=pool)
    except ValueError as exc:
        raise ConfigError(f"invalid redis URL {redacted(url)}: {exc}") from exc
