"""Redis clients for a URL, and URLs made safe to show.

``rediss://`` URLs give TLS; user and password go in the URL and are never
logged. (With no URL configured Ferret uses its embedded server: see
``ferret.embedded_redis``.)
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ferret.errors import ConfigError
from ferret.redis_retry import PatientRetry

_SECRET_PARAMS = ("password", "pass", "passwd", "secret", "token")


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


def client_for(url: str) -> redis.Redis:
    """A client for ``url`` (raw bytes, as RQ needs), with health checks, that
    rides out a Redis restart (connection errors retried for about ten
    seconds) and waits while Redis is out of memory (see ``ferret.redis_retry``)."""
    try:
        return redis.Redis.from_url(url, health_check_interval=30, retry=PatientRetry(redacted(url)))
    except ValueError as exc:
        raise ConfigError(f"invalid redis URL {redacted(url)}: {exc}") from exc


def answers_at_once(url: str) -> bool:
    """One ping, no retries, one-second timeouts: does Redis answer right now?"""
    quick = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0))
    try:
        return bool(quick.ping())
    except redis.RedisError:
        return False
    finally:
        quick.close()
