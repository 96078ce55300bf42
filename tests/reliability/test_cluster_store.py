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
from collections import Counter

import pytest

from ferret import keys
from ferret.bench.cluster_store import failover_run
from ferret.bench.redis_cluster import RedisClusterSet
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.redis_plumbing.redis_conn import client_for
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from tests.conftest import ROOT, SAMPLE

NAMESPACES = [f"tenant-{i}" for i in range(12)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    found = RedisClusterSet(tmp_path_factory.mktemp("cluster"))
    yield found
    found.stop()


def test_jobs_are_served_from_a_cluster_store_and_each_namespace_stays_on_one_shard(cluster, env, redis_client,
                                                                                     tmp_path):
    store_env = {**env, "FERRET_BACKEND__LOCAL__STORE_URL": cluster.url}
    sample = tmp_path / "sample.jsonl"
    sample.write_text(SAMPLE.read_text())
    for namespace in NAMESPACES:  # through the CLI, as an operator loads a tenant
        ingest = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(sample), "--namespace",
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
    shards = Counter(cluster.primary_of(keys.memories(ns)) for ns in NAMESPACES)
    assert len(shards) == 3, shards  # twelve tenants over three primaries: each primary holds some

    workers = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", kind],
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


def test_a_primary_killed_mid_write_loses_no_acknowledged_memory(cluster):
    report = failover_run(cluster, NAMESPACES)
    print(f"cluster failover: {report.summary()}")
    assert report.resumed_on_killed_shard >= 5, "writes to the killed shard's tenants did not resume"
    assert report.failed, "the kill cost no write: the test did not hit the killed shard"
    assert report.acked_before_kill > 0 and report.lost == 0, report.summary()
    assert report.healthy and report.failed_on_healthy_shards == 0, report.summary()  # only its shard's tenants
    fresh = client_for(cluster.url)
    for namespace in NAMESPACES:  # the change log still matches the store: one entry per version
        version = int(fresh.get(keys.memory_version(namespace)) or 0)
        last = fresh.xrevrange(keys.changes(namespace), count=1)
        assert json.loads(last[0][1][b"v"]) == version


def test_a_worker_warns_when_one_shard_down_would_stop_every_tenant(cluster, env, tmp_path):
    """Redis's default cluster-require-full-coverage yes stops every shard while one fails over (measured
    above: tenants of healthy shards failed with it, none without): a worker on such a store says so."""
    store = client_for(cluster.url)
    store_env = {**env, "FERRET_BACKEND__LOCAL__STORE_URL": cluster.url}

    def first_lines(setting: str) -> str:
        store.config_set("cluster-require-full-coverage", setting, target_nodes=store.PRIMARIES)
        worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--burst"], env=store_env,
                                  cwd=ROOT, stderr=subprocess.PIPE, text=True)
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        return err

    try:
        assert "cluster-require-full-coverage yes" in first_lines("yes")
    finally:
        assert "cluster-require-full-coverage" not in first_lines("no")


def test_a_shard_down_touches_only_its_own_tenants_scripts_included(tmp_path, env, redis_client):
    """One shard of the store wholly down (its primary and its replica). The scripts a job runs (the index
    build's lock, the change log's) are not yet on any node; each must be loaded on the node that runs it,
    not on every primary: the first query of each healthy shard's tenant is answered, while the dead
    shard's tenants fail naming the store."""
    import redis
    from rq import Worker

    from ferret.bench.redis_cluster import RedisClusterSet
    from tests.conftest import wait_until

    cluster = RedisClusterSet(tmp_path / "cluster")
    try:
        store_env = {**env, "FERRET_BACKEND__LOCAL__STORE_URL": cluster.url}
        store = client_for(cluster.url)
        memories = [Memory(id=f"m{i}", content_title=f"SOL funding note {i}") for i in range(3)]
        for namespace in NAMESPACES:
            MemoryStore(store, namespace).upsert(memories)
        dead = cluster.primary_of(keys.memories(NAMESPACES[0]))
        replica = next(port for port, role in cluster.roles().items() if role == "slave"
                       and int(redis.Redis(port=port).info("replication")["master_port"]) == dead)
        for port in cluster.ports:  # no script cached anywhere: the jobs load them
            redis.Redis(port=port).script_flush()
        healthy = [ns for ns in NAMESPACES if cluster.primary_of(keys.memories(ns)) != dead]
        worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker"], env=store_env, cwd=ROOT,
                                  stdout=(tmp_path / "worker.log").open("wb"), stderr=subprocess.STDOUT)
        try:
            assert wait_until(lambda: Worker.count(connection=redis_client) == 1, 60), "the worker serves"
            cluster.kill(replica)
            cluster.kill(dead)
            producer = Producer(redis_client, load_settings(environ=store_env))
            results = {ns: producer.wait(producer.enqueue({"query": "SOL funding", "namespace": ns,
                                                           "queue": "batch", "deadline_seconds": 60}), 90)
                       for ns in healthy}
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        assert {ns: (r.status, r.error) for ns, r in results.items() if r is None or r.status != "ok"} == {}, \
            (tmp_path / "worker.log").read_text()[-3000:]
        assert all(len(r.results) == 3 for r in results.values())
    finally:
        cluster.stop()
