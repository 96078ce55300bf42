"""A server started on a port found free is started again elsewhere when the port is taken before it
binds, and another process answering on that port is never taken for it (real redis-server)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ferret.redis_plumbing.server_process import loopback_port, start_on_a_free_port
from tests.conftest import RedisServer, redis_server_path


def _launcher(directory: Path, started: list[subprocess.Popen[bytes]]):
    def launch(port: int) -> subprocess.Popen[bytes]:
        server = subprocess.Popen([redis_server_path(), "--port", str(port), "--bind", "127.0.0.1",
                                   "--dir", str(directory), "--save", "", "--appendonly", "no"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(server)
        return server
    return launch


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    servers: list[subprocess.Popen[bytes]] = []
    yield servers
    for server in servers:
        server.kill()
        server.wait()


def _first_then_free(port: int):
    picks = iter([port])
    return lambda: next(picks, loopback_port())


def test_a_port_taken_before_the_bind_is_left_for_another(tmp_path, started, taken_port):
    port, server = start_on_a_free_port(_launcher(tmp_path, started), pick=_first_then_free(taken_port))
    assert port != taken_port
    assert len(started) == 2 and started[0].poll() is not None  # the first exited on its failed bind
    assert int(redis.Redis(port=port).info("server")["process_id"]) == server.pid == started[1].pid


def test_another_server_answering_on_the_port_is_not_taken_for_ours(tmp_path, started):
    (tmp_path / "other").mkdir()
    other = RedisServer(tmp_path / "other")
    try:
        port, server = start_on_a_free_port(_launcher(tmp_path, started), pick=_first_then_free(other.port))
        assert port != other.port
        assert started[0].poll() is not None
        assert int(redis.Redis(port=port).info("server")["process_id"]) == server.pid
    finally:
        other.stop()


def test_every_port_taken_is_an_error_that_says_so(tmp_path, started, taken_port):
    with pytest.raises(RuntimeError, match=f"port {taken_port}.*exited.*3 ports tried"):
        start_on_a_free_port(_launcher(tmp_path, started), pick=lambda: taken_port, attempts=3)
    assert len(started) == 3 and all(server.poll() is not None for server in started)
