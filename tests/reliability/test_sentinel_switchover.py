"""A planned Sentinel switchover (``SENTINEL FAILOVER``: the primary demoted to a replica, its replica
promoted), as an operator does before maintenance. The worker must take from the new primary at once: a
prefetch with a 10 s deadline enqueued right after the switchover ends ``ok``. (The worker kept its
connection to the demoted primary, where reads still succeed, and took the next prefetch after its deadline.)
Real redis-server primary and replica, three sentinels, a real worker of each class."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import pytest
import redis
from rq import Worker

from ferret.ingest import parse_memory_lines
from ferret.producer.client import Producer
from ferret.redis_plumbing.redis_conn import client_for
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from tests.conftest import ROOT, SAMPLE, wait_until
from tests.reliability.sentinel_set import SERVICE, SentinelSet


@pytest.fixture
def sentinels(tmp_path):
    cluster = SentinelSet(tmp_path / "sentinel")
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_worker_takes_from_the_new_primary_right_after_a_switchover(sentinels, tmp_path, env, worker_class):
    ferret_env = {**env, "FERRET_REDIS__URL": sentinels.url}
    client = client_for(sentinels.url)
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    MemoryStore(client, "sample").upsert(memories)
    worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", worker_class],
                              env=ferret_env, cwd=ROOT, stdout=(tmp_path / "worker.log").open("wb"),
                              stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: Worker.count(connection=client) == 1, 60)
        producer = Producer(client, load_settings(environ=ferret_env))
        warm = producer.wait(producer.enqueue({"query": "BTC thesis", "namespace": "sample"}), 30)
        assert warm is not None and warm.status == "ok"
        before = sentinels.primary()
        redis.Redis(port=sentinels.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", SERVICE)
        asked = time.monotonic()
        statuses, took = [], []
        while time.monotonic() - asked < 12:  # prefetches before, during and after the switch, one at a time
            handle = producer.enqueue({"query": f"SOL funding {len(took)}", "namespace": "sample",
                                       "deadline_seconds": 10})
            result = producer.wait(handle, 30)
            statuses.append((result.status, result.error) if result is not None else None)
            took.append(round(time.monotonic() - asked, 2))
            time.sleep(0.25)
        assert wait_until(lambda: sentinels.primary() != before, 30), "the switchover happened"
        late = [(at, status) for at, status in zip(took, statuses, strict=True) if status != ("ok", None)]
        assert late == [], (late, (tmp_path / "worker.log").read_text()[-3000:])
        gaps = [round(b - a, 2) for a, b in itertools.pairwise(took)]
        print(f"{len(took)} prefetches over the switchover, the longest between two results {max(gaps)} s")
    finally:
        worker.terminate()
        worker.wait(timeout=30)
