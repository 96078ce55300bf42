"""The keeper of the shared embedded Redis: ``python -m ferret.redis_plumbing.redis_keeper DIR IDLE``.

Started (in its own session) by the first command that needs the embedded
server of a data directory; it runs redis-server on a unix socket there as
its child and stays with it. Every command, worker and tool uses that one
server for as long as it likes. The keeper stops it (``SHUTDOWN SAVE``, so
the data is on disk) when it has had no client but the keeper for IDLE
seconds (0: never), when it gets SIGTERM (``ferret redis stop``), and it
exits when the server exits by itself. It notices a command that connected
and left between two looks by the count of connections received.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ferret.redis_plumbing.server_process import shut_down_saving, wait_until_answering

KEEPER_NAME = "ferret-keeper"
STATE_FILE = "keeper.json"
SOCKET_FILE = "redis.sock"
_POLL_SECONDS = 1.0


def server_args(binary: str, directory: Path) -> list[str]:
    return [
        binary, "--port", "0", "--unixsocket", str(directory / SOCKET_FILE), "--unixsocketperm", "700",
        "--dir", str(directory), "--dbfilename", "ferret.rdb", "--save", "60 1", "--appendonly", "no",
        "--logfile", str(directory / "redis.log"), "--daemonize", "no",
    ]


class Keeper:
    def __init__(self, directory: Path, idle_seconds: float) -> None:
        self.directory = directory
        self.idle_seconds = idle_seconds
        self.stopping = False

    def _write_state(self, server: subprocess.Popen[bytes], idle_since: float | None) -> None:
        state = {"keeper_pid": os.getpid(), "server_pid": server.pid, "started": self.started,
                 "idle_seconds": self.idle_seconds, "idle_since": idle_since}
        temporary = self.directory / (STATE_FILE + ".tmp")
        temporary.write_text(json.dumps(state))
        temporary.replace(self.directory / STATE_FILE)

    def _on_term(self, _signum: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def _nap(self) -> None:
        """One poll interval, cut short by a stop request (a signal does not end ``time.sleep``)."""
        deadline = time.monotonic() + _POLL_SECONDS
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(0.05)

    def run(self, binary: str) -> int:

        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        self.started = time.time()
        server = subprocess.Popen(server_args(binary, self.directory), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(unix_socket_path=str(self.directory / SOCKET_FILE), socket_timeout=5)
        try:
            if not wait_until_answering(client, server):
                return 1
            client.client_setname(KEEPER_NAME)
            self._write_state(server, None)
            self._watch(client, server)
            return 0
        finally:
            self._shut_down(client, server)

    def _watch(self, client: redis.Redis, server: subprocess.Popen[bytes]) -> None:
        seen_connections = -1
        idle_since: float | None = None
        while not self.stopping and server.poll() is None:
            try:
                info = client.info()
            except redis.RedisError:
                self._nap()
                continue
            others = int(info["connected_clients"]) - 1
            received = int(info["total_connections_received"])
            busy = others > 0 or received != seen_connections
            seen_connections = received
            now = time.time()
            if busy and idle_since is not None:
                idle_since = None
                self._write_state(server, None)
            elif not busy and idle_since is None:
                idle_since = now
                self._write_state(server, idle_since)
            if idle_since is not None and self.idle_seconds > 0 and now - idle_since >= self.idle_seconds:
                return
            self._nap()

    def _shut_down(self, client: redis.Redis, server: subprocess.Popen[bytes]) -> None:

        client.close()
        if server.poll() is None:
            shut_down_saving(redis.Redis(unix_socket_path=str(self.directory / SOCKET_FILE), socket_timeout=30,
                                         retry=Retry(NoBackoff(), 0)))
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        (self.directory / STATE_FILE).unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    directory, idle_seconds, binary = Path(argv[0]), float(argv[1]), argv[2]
    return Keeper(directory, idle_seconds).run(binary)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
