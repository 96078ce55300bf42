"""Workers of one queue read one memory store: a worker started without the store setting the others have
(its memories would come from the queue Redis: empty) refuses to start, says why, and is counted."""

from __future__ import annotations

import os
import subprocess
import sys

import redis
from rq import Worker

from ferret import keys
from ferret.cli import exit_codes
from tests.conftest import ROOT, RedisServer, wait_until


def test_a_worker_whose_store_is_another_refuses_to_start_and_is_counted(tmp_path, redis_server, redis_client):
    store = RedisServer(tmp_path)  # the memories' own Redis
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}
    base = {**clean, "FERRET_REDIS__URL": redis_server.url, "PYTHONPATH": str(ROOT)}
    right = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q"],
                             env={**base, "FERRET_BACKEND__LOCAL__STORE_URL": store.url})
    try:
        assert wait_until(lambda: Worker.count(connection=redis_client) == 1, 60)
        wrong = subprocess.run([sys.executable, "-m", "ferret.cli.main", "worker", "-q", "--burst"], env=base,
                               capture_output=True, text=True, timeout=120)
        assert wrong.returncode == exit_codes.USAGE, wrong.stderr
        assert "is not the one the other workers of this queue read" in wrong.stderr
        assert "the queue Redis itself" in wrong.stderr and "ferret:store-binding" in wrong.stderr
        assert int(redis_client.get(keys.store_mismatches())) == 1
        same = subprocess.run([sys.executable, "-m", "ferret.cli.main", "worker", "-q", "--burst"],
                              env={**base, "FERRET_BACKEND__LOCAL__STORE_URL": store.url}, capture_output=True,
                              text=True, timeout=120)
        assert same.returncode == 0, same.stderr  # the same store: served, then empty queues end the burst
    finally:
        right.terminate()
        right.wait(timeout=60)
        store.stop()
    assert redis.Redis.from_url(redis_server.url).get(keys.store_binding()).startswith(b"local:")


def test_the_store_that_holds_the_memories_wins_whatever_the_start_order(tmp_path, redis_server, redis_client):
    """The worker started without the store setting comes first (its store, the queue Redis, holds no
    memories) and binds the queue; the worker with the right store comes second. The right one is not
    refused: it takes the binding, the empty one stops saying why, and the queries are answered from the
    memories (they answered ``ok`` with no results, silently, when the first worker decided)."""
    from ferret.producer.client import Producer
    from ferret.records import Memory
    from ferret.settings import load_settings
    from ferret.worker.backends.local import MemoryStore

    store = RedisServer(tmp_path)
    MemoryStore(redis.Redis.from_url(store.url), "alice").upsert(
        [Memory(id="btc", content_title="BTC thesis", content_body="Halving supply shock")])
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FERRET_")}
    base = {**clean, "FERRET_REDIS__URL": redis_server.url, "PYTHONPATH": str(ROOT)}
    right_env = {**base, "FERRET_BACKEND__LOCAL__STORE_URL": store.url}
    wrong = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q"], env=base,
                             stderr=subprocess.PIPE, text=True)
    right = None
    try:
        assert wait_until(lambda: Worker.count(connection=redis_client) == 1, 60)
        assert redis_client.get(keys.store_binding()).endswith(b" empty")
        right = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q"], env=right_env)
        ended = wrong.wait(timeout=60)
        said = wrong.stderr.read()
        assert ended == exit_codes.USAGE, said
        assert "holds no memories" in said and "this worker stops" in said, said
        assert right.poll() is None, "the worker with the memories serves"
        producer = Producer(redis_client, load_settings(environ=right_env))
        for _ in range(5):
            result = producer.wait(producer.enqueue({"query": "BTC thesis", "namespace": "alice"}), 30)
            assert result is not None and result.status == "ok" and [r.id for r in result.results] == ["btc"]
        assert redis_client.get(keys.store_binding()).endswith(b" memories")
    finally:
        for proc in (wrong, right):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)
        store.stop()
