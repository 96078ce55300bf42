"""Integration fixtures: real redis-server, real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from rq import Worker

from ferret.ingest import parse_memory_lines
from ferret.producer.client import Producer
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from tests.conftest import ROOT, SAMPLE
from tests.timing import scaled


def pytest_collection_modifyitems(items):  # type: ignore[no-untyped-def]
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def env(redis_server) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}
    # a prefetch's default deadline (5 s) stretched by the machine's slowdown now (tests.timing): on a busy
    # machine a job must not expire in the queue where a test is about something else
    return {**clean, "FERRET_REDIS__URL": redis_server.url, "PYTHONPATH": str(ROOT),
            "FERRET_SERVICE__PREFETCH_DEADLINE_SECONDS": f"{scaled(5.0):.1f}"}


@pytest.fixture
def settings(env):
    return load_settings(environ=env)


@pytest.fixture
def producer(redis_client, settings) -> Producer:
    return Producer(redis_client, settings)


@pytest.fixture
def sample_namespace(redis_client) -> str:
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    MemoryStore(redis_client, "sample").upsert(memories)
    return "sample"


@pytest.fixture
def start_workers(env, redis_client) -> Iterator[Callable[..., list[subprocess.Popen[bytes]]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(count: int = 1, *args: str, extra_env: dict[str, str] | None = None,
              wait: bool = True) -> list[subprocess.Popen[bytes]]:
        before = Worker.count(connection=redis_client)
        procs = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", *args],
                                  env={**env, **(extra_env or {})}) for _ in range(count)]
        started.extend(procs)
        deadline = time.monotonic() + 30
        while wait and Worker.count(connection=redis_client) < before + count and time.monotonic() < deadline:
            time.sleep(0.05)
        return procs

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
