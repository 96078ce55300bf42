"""Redis round trips per job, with RQ's stock bookkeeping and with Ferret's lean layer.

A round trip is one send to Redis followed by its answer: a single command,
or a whole pipeline / MULTI-EXEC. They are counted on the client, by
wrapping redis-py's ``Connection.send_packed_command``, in a worker that
runs in this process (``SimpleWorker``, burst mode, fast-path jobs on the
local backend). Fixed costs (start-up, the last empty dequeue, shut-down)
cancel out: the figure is the difference between a run of ``2n`` jobs and
a run of ``n`` jobs, divided by ``n``. The same difference of the
redis-server's own CPU time (``/proc/<pid>/stat``, enqueue and run) gives
what a job costs Redis, so what one Redis core can carry.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
from redis.connection import AbstractConnection

from ferret.bench.common import cpu_seconds, private_redis, sample_memories
from ferret.producer.client import Producer
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore


@contextmanager
def _counting() -> Iterator[list[int]]:
    sent = [0]
    original = AbstractConnection.send_packed_command

    def send(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent[0] += 1
        original(self, command, check_health)

    AbstractConnection.send_packed_command = send  # type: ignore[assignment,method-assign]
    try:
        yield sent
    finally:
        AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


def _round_trips(url: str, jobs: int, lean: bool, server_pid: int) -> tuple[int, float]:
    """Round trips the worker made, and the Redis server's CPU seconds for enqueue and run."""
    client = redis.Redis.from_url(url)
    client.flushdb()
    MemoryStore(client, "bench").upsert(sample_memories())
    settings = load_settings(environ={"FERRET_REDIS__URL": url, "FERRET_CACHE__ENABLED": "false",
                                      "FERRET_SERVICE__LEAN_BOOKKEEPING": str(lean).lower()})
    producer = Producer(client, settings)
    cpu_before = cpu_seconds(server_pid)
    for number in range(jobs):
        producer.enqueue({"query": f"funding squeeze playbook {number}", "namespace": "bench"})
    worker = build_worker(client, settings, worker_class="simple")
    with _counting() as sent:
        worker.work(burst=True, logging_level="WARNING", with_scheduler=False)
    return sent[0], cpu_seconds(server_pid) - cpu_before


def measure(jobs: int = 100) -> dict[str, float]:
    """Round trips per job, stock RQ and lean, and the Redis CPU a job costs
    (microseconds), on a private redis-server."""
    with tempfile.TemporaryDirectory(prefix="ferret-rt-") as home:
        server = private_redis(Path(home))
        assert server.process is not None
        try:
            figures = {}
            for name, lean in (("stock", False), ("lean", True)):
                (small, small_cpu), (large, large_cpu) = (_round_trips(server.url, count, lean, server.process.pid)
                                                          for count in (jobs, 2 * jobs))
                figures[name] = round((large - small) / jobs, 2)
                figures[f"{name}_redis_cpu_us"] = round((large_cpu - small_cpu) / jobs * 1e6, 1)
            return figures
        finally:
            server.stop()
