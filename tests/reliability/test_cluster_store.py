"""The memory store on a real Redis Cluster (three primaries, three replicas).

Ferret's queues, results and traces stay on the queue Redis; each
namespace's memories, version, change log, embeddings and snapshot live on
one shard of the cluster (``backend.local.store_url = redis+cluster://...``).
Workers of both classes serve jobs from it and follow its writes; a primary
SIGKILLed mid-write loses no write that was acknowledged with the replica
option, and writes resume once its replica is promoted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
import redis

from benchmarks.redis_cluster import RedisClusterSet
from ferret import keys
from ferret.errors import BackendError
from ferret.records import Memory
from ferret.redis_conn import client_for
from ferret.settings import load_settings
from producer.client import Producer
from tests.conftest import ROOT, SAMPLE
from worker.backends.local import MemoryStore

NAMESPACES = [f"tenant-{i}" for i in range(12)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = RedisClusterSet(tmp_path_factory.mktemp("cluster"))
    yield found
    found.stop()


def _shard_of(cluster: RedisClusterSet, key: str) -> int:
    return cluster.primary_of(key)


def test_jobs_are_served_from_a_cluster_store_and_each_namespace_stays_on_one_shard(cluster, env, redis_client,
                                                                                     tmp_path):
    store_env = {**env, "FERRET_BACKEND__LOCAL__STORE_URL": cluster.url}
    sample = tmp_path / "sample.jsonl"
    sample.write_text(SAMPLE.read_text())
    for namespace in NAMESPACES:  # through the CLI, as an operator loads a tenant
        ingest = subprocess.run([sys.executable, "-m", "ferret_cli.main", "ingest", str(sample), "--namespace",
                                 namespace, "--replace", "--quiet"], env=store_env, cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert ingest.returncode == 0, ingest.stderr
    store = client_for(cluster.url)
    count = len(SAMPLE.read_text().splitlines())
    assert all(store.hlen(keys.memories(ns)) == count for ns in NAMESPACES)
    # Nothing of the store on the queue Redis, nothing of the queues on the cluster.
    assert not list(redis_client.scan_iter("ferret:ns:{*"))
    for namespace in NAMESPACES:
        slots = {int(store.keyslot(key)) for key in (
            keys.memories(namespace), keys.memory_version(namespace), keys.changes(namespace),
            keys.embeddings(namespace), keys.index_snapshot(namespace), keys.affinity(namespace, "m1"))}
        assert len(slots) == 1, (namespace, slots)
    shards = Counter(_shard_of(cluster, keys.memories(ns)) for ns in NAMESPACES)
    assert len(shards) == 3, shards  # twelve tenants over three primaries: each primary holds some

    workers = [subprocess.Popen([sys.executable, "-m", "ferret_cli.main", "worker", "--worker-class", kind],
                                env=store_env, cwd=ROOT, stdout=(tmp_path / f"{kind}.log").open("wb"),
                                stderr=subprocess.STDOUT) for kind in ("simple", "fork")]
    try:
        producer = Producer(redis_client, load_settings(environ=store_env))
        handles = [producer.enqueue({"query": "SOL funding rate", "namespace": ns, "queue": queue})
                   for ns in NAMESPACES for queue in ("prefetch", "batch")]
        results = [producer.wait(handle, 60) for handle in handles]
        assert [r.status for r in results] == ["ok"] * len(handles), [r.error for r in results]
        assert all(r.results for r in results)
        # A write through the cluster is seen by the next job (the workers follow the change log).
        fresh = Memory.model_validate({"id": "fresh-1", "content_title": "zanzibar quorum heliotrope",
                                       "content_body": "a memory written after the workers warmed up"})
        for namespace in NAMESPACES[:4]:
            MemoryStore(store, namespace).upsert([fresh])
            result = producer.wait(producer.enqueue({"query": "zanzibar heliotrope", "namespace": namespace,
                                                     "options": {"cache": False}}), 60)
            assert result.status == "ok" and result.results[0].id == "fresh-1", result
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(timeout=20)
    assert not [key for key in store.scan_iter("rq:*")] and not list(store.scan_iter("ferret:result:*"))


def _write_until(store: redis.Redis, stop: threading.Event, acked: dict[str, list[str]],
                 errors: Counter[str]) -> None:
    """Write one memory at a time, round-robin over the namespaces, with the replica option;
    keep what was acknowledged. A write that fails is counted and the writer goes on."""
    stores = {ns: MemoryStore(store, ns, replicas=1, replica_timeout_ms=500) for ns in NAMESPACES}
    number = 0
    while not stop.is_set():
        for namespace, writer in stores.items():
            number += 1
            memory = Memory.model_validate({"id": f"w{number}", "content_title": f"write {number}"})
            try:
                writer.upsert([memory])
            except (BackendError, redis.RedisError) as exc:
                errors[type(exc).__name__] += 1
                continue
            acked[namespace].append(memory.id)


def test_a_primary_killed_mid_write_loses_no_acknowledged_memory(cluster, tmp_path):
    store = client_for(cluster.url)
    victim = _shard_of(cluster, keys.memories(NAMESPACES[0]))
    on_victim = [ns for ns in NAMESPACES if _shard_of(cluster, keys.memories(ns)) == victim]
    acked: dict[str, list[str]] = {ns: [] for ns in NAMESPACES}
    errors: Counter[str] = Counter()
    stop = threading.Event()
    writer = threading.Thread(target=_write_until, args=(store, stop, acked, errors), daemon=True)
    writer.start()
    try:
        time.sleep(1.0)
        before = sum(len(ids) for ids in acked.values())
        killed = cluster.kill(victim)
        promoted = cluster.wait_promoted(victim)
        written_at_promotion = {ns: len(acked[ns]) for ns in on_victim}
        cluster.restart(victim)  # it comes back as the replica of the node that took its slots
        cluster.wait_healthy()
        rejoined = time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(len(acked[ns]) <= written_at_promotion[ns] + 5
                                                  for ns in on_victim):
            time.sleep(0.1)
    finally:
        stop.set()
        writer.join(timeout=30)
    print(f"cluster failover: promoted {promoted - killed:.2f} s after the kill, old primary back as a replica "
          f"{rejoined - promoted:.2f} s later; {before} writes acknowledged before the kill, "
          f"{sum(len(ids) for ids in acked.values())} in all; failed writes {dict(errors)}")
    assert all(len(acked[ns]) > written_at_promotion[ns] + 5 for ns in on_victim), "writes did not resume"
    assert errors, "the kill cost no write: the test did not hit the killed shard"
    fresh = client_for(cluster.url)
    lost = {ns: [i for i, raw in zip(ids, fresh.hmget(keys.memories(ns), ids), strict=True) if raw is None]
            for ns, ids in acked.items() if ids}
    assert not any(lost.values()), {ns: len(ids) for ns, ids in lost.items() if ids}
    for namespace in NAMESPACES:  # the change log still matches the store: one entry per version
        version = int(fresh.get(keys.memory_version(namespace)) or 0)
        last = fresh.xrevrange(keys.changes(namespace), count=1)
        assert json.loads(last[0][1][b"v"]) == version

