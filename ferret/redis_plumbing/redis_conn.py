"""Redis clients for a URL, and URLs made safe to show.

``rediss://`` URLs give TLS; user and password go in the URL and are never
logged. (With no URL configured Ferret uses its embedded server: see
``ferret.redis_plumbing.embedded_redis``.)

Redis Sentinel: ``redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]``
(``rediss+sentinel://`` for TLS to the primary) names the sentinels and the
service they watch; the client asks them for the current primary and asks
again after a failover (redis-py's ``Sentinel``). The user and password are
the primary's; ``?sentinel_password=...`` authenticates to the sentinels.

Redis Cluster (the memory store only, ``backend.local.store_url``):
``redis+cluster://[user:password@]host:port[,host:port...]`` names some of
the cluster's nodes (``rediss+cluster://`` for TLS); redis-py's
``RedisCluster`` learns the rest, routes each key to its shard and follows
a failover (MOVED answers, topology refreshed on errors).
"""

from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import SSLConnection
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool, SentinelManagedConnection

from ferret.errors import ConfigError, RedisUnreachable
from ferret.redis_plumbing.redis_retry import PatientRetry

_SECRET_PARAMS = ("password", "pass", "passwd", "secret", "token", "sentinel_password")
SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}  # scheme -> TLS to the primary
CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}  # scheme -> TLS


@dataclass(frozen=True)
class SentinelAddress:
    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None
    ssl: bool = False


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in SENTINEL_SCHEMES


def _split(url: str) -> tuple[str, str | None, str | None, list[str], str, str]:
    """scheme, user, password, host:port items, path, query of a multi-host URL."""
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    credentials, _, hosts = netloc.rpartition("@")
    username, password = None, None
    if credentials:
        user, has_password, secret = credentials.partition(":")
        username, password = unquote(user) or None, unquote(secret) if has_password else None
    return scheme, username, password, list(filter(None, hosts.split(","))), path, query


def _host_ports(shown: str, items: list[str], what: str) -> tuple[tuple[str, int], ...]:
    found = []
    for item in items:
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"invalid redis URL {shown}: {what} {item!r} is not host:port")
        found.append((host.strip("[]"), int(port)))
    if not found:
        raise ConfigError(f"invalid redis URL {shown}: no {what} host:port")
    return tuple(found)


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The parts of a ``redis+sentinel://`` URL; ``ConfigError`` naming what is wrong."""
    shown = redacted(url)
    scheme, username, password, items, path, query = _split(url)
    sentinels = _host_ports(shown, items, "sentinel")
    service, _, db = path.partition("/")
    if not service:
        raise ConfigError(f"invalid redis URL {shown}: no service name (.../service_name[/db])")
    if db and not db.isdigit():
        raise ConfigError(f"invalid redis URL {shown}: db {db!r} is not a number")
    params = dict(parse_qsl(query))
    unknown = set(params) - {"sentinel_password"}
    if unknown:
        raise ConfigError(f"invalid redis URL {shown}: unknown parameter(s) {', '.join(sorted(unknown))}")
    return SentinelAddress(sentinels, unquote(service), int(db or 0), username, password,
                           params.get("sentinel_password"), SENTINEL_SCHEMES[scheme.lower()])


@dataclass(frozen=True)
class ClusterAddress:
    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def is_cluster_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterAddress:
    """The parts of a ``redis+cluster://`` URL; ``ConfigError`` naming what is wrong."""
    shown = redacted(url)
    scheme, username, password, items, path, query = _split(url)
    nodes = _host_ports(shown, items, "cluster node")
    if path.strip("/") not in ("", "0"):
        raise ConfigError(f"invalid redis URL {shown}: a Redis Cluster has only db 0")
    if query:
        raise ConfigError(f"invalid redis URL {shown}: a cluster URL takes no parameters")
    return ClusterAddress(nodes, username, password, CLUSTER_SCHEMES[scheme.lower()])


def _cluster_client(url: str, **client: Any) -> RedisCluster:
    """The cluster client; it asks a node for the slot map at once, so an
    unreachable cluster is ``RedisUnreachable`` here, in one line."""
    address = parse_cluster_url(url)
    try:
        return RedisCluster(startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
                            username=address.username, password=address.password, ssl=address.ssl, **client)
    except (RedisClusterException, redis.RedisError) as exc:
        raise RedisUnreachable(f"cannot reach the Redis Cluster at {redacted(url)}: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc


class _PrimaryFollowingConnection(SentinelManagedConnection):
    """A sentinel-managed connection that asks the sentinels for the primary on
    every attempt to connect. redis-py's reconnects a dropped connection to the
    address it had (``send_command`` reconnects without asking again), so after
    a failover it kept knocking on the dead primary until its retries ran out."""

    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super()._connect()


class _PrimaryFollowingSSLConnection(_PrimaryFollowingConnection, SSLConnection):
    pass


def _sentinel_client(url: str, **client: Any) -> redis.Redis:
    address = parse_sentinel_url(url)
    sentinel_kwargs: dict[str, Any] = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
    if address.sentinel_password:
        sentinel_kwargs["password"] = address.sentinel_password
    sentinel = Sentinel(list(address.sentinels), sentinel_kwargs=sentinel_kwargs)
    connection = _PrimaryFollowingSSLConnection if address.ssl else _PrimaryFollowingConnection
    return sentinel.master_for(address.service, db=address.db, username=address.username,
                               password=address.password, ssl=address.ssl, connection_class=connection, **client)


def redacted(url: str) -> str:
    """The URL with every password replaced, for logs and errors: the one in
    the user-info part and any query parameter that carries one
    (``?password=...`` is accepted by redis-py)."""
    if "://" not in url:  # not a URL redis-py takes: show it only if it cannot hold a secret
        return url if "@" not in url and "pass" not in url.lower() else "<unparsable URL>"
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            credentials, host = netloc.rsplit("@", 1)
            user = credentials.split(":", 1)[0]
            netloc = f"{user}:***@{host}" if ":" in credentials else f"***@{host}"
        query = urlencode([(key, "***" if key.lower() in _SECRET_PARAMS else value)
                           for key, value in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
        shown = f"{parts.scheme}://{netloc}{parts.path}"
        return shown + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:  # not even a URL: show nothing of it
        return "<unparsable URL>"


def url_of(client: redis.Redis) -> str:
    """A URL for the server ``client`` talks to, password included (for a child
    process; pass it through ``redacted`` to show it)."""
    if isinstance(client, RedisCluster):
        kwargs = client.nodes_manager.connection_kwargs
        password = kwargs.get("password")
        auth = f"{quote(kwargs.get('username') or '', safe='')}:{quote(password, safe='')}@" if password else ""
        nodes = client.get_nodes() or list(client.nodes_manager.startup_nodes.values())
        scheme = "rediss+cluster" if kwargs.get("ssl") else "redis+cluster"
        return f"{scheme}://{auth}{','.join(f'{node.host}:{node.port}' for node in nodes)}"
    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    password = kwargs.get("password")
    auth = f"{quote(kwargs.get('username') or '', safe='')}:{quote(password, safe='')}@" if password else ""
    tls = bool(kwargs.get("ssl")) or "SSL" in pool.connection_class.__name__
    if isinstance(pool, SentinelConnectionPool):
        manager = pool.sentinel_manager
        hosts = ",".join(f"{s.connection_pool.connection_kwargs.get('host', 'localhost')}:"
                         f"{s.connection_pool.connection_kwargs.get('port', 26379)}" for s in manager.sentinels)
        secret = manager.sentinel_kwargs.get("password")
        query = f"?sentinel_password={quote(secret, safe='')}" if secret else ""
        scheme = "rediss+sentinel" if tls else "redis+sentinel"
        return f"{scheme}://{auth}{hosts}/{pool.service_name}/{kwargs.get('db', 0)}{query}"
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}"
    scheme = "rediss" if tls else "redis"
    return f"{scheme}://{auth}{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


# Redis, a Sentinel or a Cluster shard out of reach past a client's own retries (what callers translate into
# ``RedisUnreachable`` or wait out).
REDIS_AWAY: tuple[type[redis.RedisError], ...] = (redis.ConnectionError, redis.TimeoutError,
                                                 redis.exceptions.ClusterError)


def reason(error: redis.RedisError) -> str:
    """What went wrong, in a line: redis-py's "no master" error carries the repr of
    every sentinel client it asked, one long line of internals."""
    if isinstance(error, MasterNotFoundError):
        service = str(error).split("'")[1] if str(error).count("'") >= 2 else "?"
        return f"no sentinel named a primary for service {service!r} (none answered, or none knows it)"
    return str(error)


# A plain URL's pool: threads sharing one client past this many commands at once wait for a free
# connection (up to POOL_WAIT_SECONDS) instead of failing, as redis-py's own pool does past 100.
MAX_CONNECTIONS = 1000
POOL_WAIT_SECONDS = 30.0


class _FreeSlots(queue.LifoQueue[Any]):
    """A blocking pool's queue of free slots, born full: redis-py fills a new pool's queue with one ``None``
    per connection it may open, a ``put_nowait`` each, until the queue says it is full; at
    ``MAX_CONNECTIONS`` that was ~1-2 ms of a client's start (an agent's ``ferret.connect()``). This queue
    starts with its slots in it, so the fill ends at its first ``put_nowait``; the pool uses it as before."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self.queue.extend([None] * maxsize)


def client_for(url: str) -> redis.Redis:
    """A client for ``url`` (raw bytes, as RQ needs), with health checks, that
    rides out a Redis restart (connection errors retried for about ten
    seconds) and waits while Redis is out of memory (see ``ferret.redis_plumbing.redis_retry``).
    On a plain URL any number of threads may share it (see ``MAX_CONNECTIONS``); a
    Sentinel or cluster URL keeps redis-py's own pool.
    A ``redis+cluster://`` URL gives a ``RedisCluster``, which has the commands
    the memory store uses (keys of one namespace share a slot), not all of
    ``redis.Redis``'s: only the store takes one (``ferret.redis_plumbing.store_conn``)."""
    try:
        if is_cluster_url(url):
            return cast(redis.Redis, _cluster_client(url, health_check_interval=30))
        if is_sentinel_url(url):
            return _sentinel_client(url, health_check_interval=30, retry=PatientRetry(redacted(url)))
        pool = redis.BlockingConnectionPool.from_url(url, health_check_interval=30, retry=PatientRetry(redacted(url)),
                                                     max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT_SECONDS,
                                                     queue_class=_FreeSlots)
        client = redis.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True  # as from_url's: closing the client closes its pool
        return client
    except ValueError as exc:
        raise ConfigError(f"invalid redis URL {redacted(url)}: {exc}") from exc


def answers_at_once(url: str) -> bool:
    """One ping, no retries, one-second timeouts: does Redis answer right now?"""
    quick_options: dict[str, Any] = {"socket_connect_timeout": 1, "socket_timeout": 1, "retry": Retry(NoBackoff(), 0)}
    if is_cluster_url(url):
        quick: Any = _cluster_client(url, socket_connect_timeout=1, socket_timeout=1)
    else:
        quick = _sentinel_client(url, **quick_options) if is_sentinel_url(url) \
            else redis.Redis.from_url(url, **quick_options)
    try:
        return bool(quick.ping())
    except redis.RedisError:
        return False
    finally:
        quick.close()
