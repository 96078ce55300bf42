"""Redis restarted during a batch; SIGTERM while a job runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from ferret.ingest import parse_memory_lines
from ferret.worker.backends.local import MemoryStore
from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import ROOT, SAMPLE, free_port, redis_server_path, wait_for_redis


class DurableRedis:
    """A redis-server with an fsync-always AOF, restartable on the same port and data."""

    def __init__(self, directory) -> None:
        self.directory, self.port = directory, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [redis_server_path(), "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.directory), "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_redis(redis.Redis.from_url(self.url))

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # SIGTERM: redis flushes the AOF and exits
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def durable_redis(tmp_path):
    server = DurableRedis(tmp_path)
    server.start()
    yield server
    server.stop()


# Up to two batch waits (the first may give up on a job the outage held up; --resume finishes it).
@pytest.mark.timeout(300)
def test_redis_restart_during_a_batch(tmp_path, durable_redis):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_")},
           "FERRET_REDIS__URL": durable_redis.url, "PYTHONPATH": str(ROOT)}
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    MemoryStore(redis.Redis.from_url(durable_redis.url), "sample").upsert(memories)
    lines = [json.dumps({"query": f"BTC thesis {i}", "namespace": "sample"}) for i in range(600)]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(lines) + "\n")
    workers = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker"], env=env,
                                stderr=subprocess.DEVNULL) for _ in range(2)]
    log = (tmp_path / "batch.log").open("wb")  # a file, not a pipe nobody reads: a full pipe would stall the batch
    batch = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out", str(out),
                              "--wait", "60"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 100):
            time.sleep(0.05)
        durable_redis.stop()
        time.sleep(1.0)
        durable_redis.start()
        first = batch.wait(timeout=120)
        if first != 0:  # the producer gave up during the outage: resume it, as a user would
            resumed = subprocess.run([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out",
                                      str(out), "--resume", "--wait", "120"], env=env, capture_output=True,
                                     text=True, timeout=240)
            assert resumed.returncode == 0, resumed.stderr[-2000:]
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        ids = [row["request_id"] for row in rows]
        assert len(ids) == len(set(ids)) == 600, "every line exactly once"
        assert {row["status"] for row in rows} == {"ok"}
        for process in workers:
            assert process.poll() is None, "workers reconnected by themselves"
    finally:
        log.close()
        for process in workers:
            process.terminate()
        for process in workers:
            process.wait(timeout=20)


def test_sigterm_lets_the_running_job_finish(producer, start_workers, redis_client, sample_nous):
    sample_nous.slow_first, sample_nous.delay = 1, 2.0
    (worker,) = start_workers(1, extra_env=nous_env(sample_nous, timeout_seconds=10))
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 30})
    while not sample_nous.requests:
        time.sleep(0.02)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    result = producer.result(handle)
    assert result is not None and result.status == "ok", "the in-flight job finished before the worker left"
