"""``ferret serve`` as users run it: the real command in its own process, on a free loopback port, against the
tests' real redis-server, with keys made by ``ferret keys create``."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def logged(self) -> str:
        return self.log.read_text(errors="replace")


def make_key(env: dict[str, str], *args: str) -> str:
    """A key made by the CLI: the last line of its standard output."""
    made = subprocess.run([sys.executable, "-m", "ferret.cli.main", "keys", "create", *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def closed_by_the_server(sock: socket.socket) -> bool:
    """Whether the server closed the socket (a read gives end-of-file or a reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@pytest.fixture
def serve(env, tmp_path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(*args: str, extra_env: dict[str, str] | None = None, scheme: str = "http",
              verify: ssl.SSLContext | bool = False) -> Served:
        port = free_port()
        log = tmp_path / f"serve-{port}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "serve", "--port", str(port), *args],
                                       env={**env, **(extra_env or {})}, stdout=sink, stderr=subprocess.STDOUT)
        served = Served(f"{scheme}://127.0.0.1:{port}", process, log)
        started.append(served)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, served.logged()
            try:
                if httpx.get(f"{served.url}/healthz", timeout=1, verify=verify).status_code == 200:
                    return served
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError(f"ferret serve did not answer: {served.logged()}")

    yield start
    for served in started:
        served.process.terminate()
        try:
            served.process.wait(10)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait()
