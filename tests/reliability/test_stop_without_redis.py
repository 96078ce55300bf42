"""A worker stops when asked, whatever Redis is doing, and a worker started while Redis is away waits for it:
real workers of both classes, a real redis-server stopped under them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import redis
from rq import Worker

from tests.conftest import ROOT, wait_until
from tests.reliability.tcp_proxy import CuttableProxy
from tests.reliability.test_redis_restart_and_shutdown import DurableRedis

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(300)]

# How long a test gives a process to do what it must (exit, register): far more than it takes, so that a
# busy machine does not fail it; a worker that hangs never does it at all.
PATIENCE = 120


def _env(url: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_")},
            "FERRET_REDIS__URL": url, "PYTHONPATH": str(ROOT)}


def _worker(url: str, kind: str, log) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", kind],
                            env=_env(url), stdout=log, stderr=log)


@pytest.mark.parametrize("kind", ["simple", "fork"])
def test_sigterm_stops_a_worker_whose_redis_is_gone(tmp_path, kind):
    server = DurableRedis(tmp_path)
    server.start()
    log = (tmp_path / "worker.log").open("wb")
    worker = _worker(server.url, kind, log)
    try:
        client = redis.Redis.from_url(server.url)
        assert wait_until(lambda: Worker.count(connection=client) == 1, PATIENCE), (tmp_path / "worker.log").read_text()
        client.close()
        server.stop()  # Redis gone for good, under an idle worker
        wait_until(lambda: worker.poll() is not None, 2)  # the worker meets the outage, and lives on
        assert worker.poll() is None
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=PATIENCE)  # TimeoutExpired: the stop hung on Redis
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        server.stop()
    assert worker.returncode is not None


@pytest.mark.parametrize("kind", ["simple", "fork"])
def test_sigterm_stops_a_worker_whose_redis_went_silent(tmp_path, redis_server, kind):
    """Packets dropped, no reset: the worker's reads wait on a socket that never answers."""
    proxy = CuttableProxy(redis_server.port)
    log = (tmp_path / "worker.log").open("wb")
    worker = _worker(proxy.url, kind, log)
    try:
        client = redis.Redis.from_url(redis_server.url)
        assert wait_until(lambda: Worker.count(connection=client) >= 1, PATIENCE), (tmp_path / "worker.log").read_text()
        client.close()
        proxy.silence()
        assert not wait_until(lambda: worker.poll() is not None, 3)  # its dequeue now waits on silence
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=PATIENCE)  # TimeoutExpired: the stop waited on Redis for ever
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        proxy.close()
    assert worker.returncode is not None


def test_a_worker_started_while_redis_is_away_waits_for_it_then_serves(tmp_path):
    server = DurableRedis(tmp_path)  # not started: nothing listens on its port yet
    log = (tmp_path / "worker.log").open("wb")
    worker = _worker(server.url, "simple", log)
    try:
        assert not wait_until(lambda: worker.poll() is not None, 15), (tmp_path / "worker.log").read_text()
        assert "retrying until it does" in (tmp_path / "worker.log").read_text()
        server.start()
        client = redis.Redis.from_url(server.url)
        assert wait_until(lambda: Worker.count(connection=client) == 1, PATIENCE), (tmp_path / "worker.log").read_text()
        client.close()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=PATIENCE) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        server.stop()


def test_a_worker_says_redis_is_away_in_a_few_lines_not_tracebacks(tmp_path):
    """A known condition (Redis out of reach for a while) is a line per kind and window with a count
    (ferret.repeated_lines), never a traceback; the worker serves on when Redis is back."""
    server = DurableRedis(tmp_path)
    server.start()
    log_path = tmp_path / "worker.log"
    log = log_path.open("wb")
    worker = _worker(server.url, "simple", log)
    try:
        client = redis.Redis.from_url(server.url)
        assert wait_until(lambda: Worker.count(connection=client) == 1, PATIENCE), log_path.read_text()
        client.close()
        server.stop()
        wait_until(lambda: worker.poll() is not None, 15)  # fifteen seconds of Redis away
        assert worker.poll() is None, log_path.read_text()
        server.start()
        client = redis.Redis.from_url(server.url)
        assert wait_until(lambda: Worker.count(connection=client) == 1, PATIENCE), log_path.read_text()
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=PATIENCE)
        server.stop()
    text = log_path.read_text()
    assert "Traceback" not in text, text[-3000:]
    away = [line for line in text.splitlines() if "out of reach" in line or "could not connect" in line]
    assert 1 <= len(away) <= 15, "\n".join(away)
