"""``ferret bench cluster``: the memory store on a Redis Cluster against one Redis.

A real cluster (three primaries, three replicas; ``ferret.bench.redis_cluster``)
and a single redis-server, both on loopback TCP, each behind its own queue
Redis and its own worker (``--worker-class simple``):
- **spread**: T tenants of M memories written to both stores; how many
  tenants, memories and bytes each primary holds;
- **write-then-query**: the agent's turn: one memory written to a tenant,
  then a query of that tenant through the service (cache off), timed from
  the write to the result; rounds alternate cluster and single Redis, and
  the p50s and their ratio are reported;
- **bytes per memory**: what the single Redis's ``used_memory`` grows by per
  memory written (memory JSON, change-log entry), without and with a
  384-float embedding (all-MiniLM-L6-v2's size, float32: 1,536 bytes);
- **failover**: writes with the replica option (``store_min_replicas_acked=1``)
  go round the tenants while one primary is SIGKILLed; its replica is
  promoted, the old primary restarted (it rejoins as a replica), and every
  acknowledged write is looked for afterwards.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import redis
from redis.cluster import RedisCluster

from ferret import keys
from ferret.bench.common import outside_env, percentile, wait_or_kill
from ferret.bench.redis_cluster import RedisClusterSet, free_port
from ferret.bench.scale import Corpus
from ferret.errors import BackendError
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.redis_plumbing.embedded_redis import EmbeddedRedis
from ferret.redis_plumbing.redis_conn import client_for
from ferret.rq_layer.producer_side import workers_up
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore


@dataclass
class FailoverReport:
    killed_port: int
    promoted_after_s: float = 0.0
    rejoined_after_s: float = 0.0
    acked_before_kill: int = 0
    acked: dict[str, list[str]] = field(default_factory=dict)
    failed: Counter[str] = field(default_factory=Counter)
    failed_by_namespace: Counter[str] = field(default_factory=Counter)
    healthy: frozenset[str] = frozenset()  # namespaces on shards whose primary was not killed
    resumed_on_killed_shard: int = 0  # acknowledged writes to the killed shard's tenants after it rejoined
    lost: int = 0

    @property
    def failed_on_healthy_shards(self) -> int:
        """Writes refused for tenants whose shard kept its primary: a failover must cost them nothing."""
        return sum(count for namespace, count in self.failed_by_namespace.items() if namespace in self.healthy)

    def summary(self) -> dict[str, Any]:
        return {"killed_port": self.killed_port, "promoted_after_s": round(self.promoted_after_s, 2),
                "rejoined_after_s": round(self.rejoined_after_s, 2), "acked_before_kill": self.acked_before_kill,
                "failed_on_healthy_shards": self.failed_on_healthy_shards,
                "acked": sum(len(ids) for ids in self.acked.values()), "failed_writes": dict(self.failed),
                "resumed_on_killed_shard": self.resumed_on_killed_shard, "lost": self.lost}


def _write_round_robin(store: redis.Redis, namespaces: list[str], stop: threading.Event,
                       report: FailoverReport) -> None:
    writers = {ns: MemoryStore(store, ns, replicas=1, replica_timeout_ms=500) for ns in namespaces}
    number = 0
    while not stop.is_set():
        for namespace, writer in writers.items():
            number += 1
            memory = Memory(id=f"fo{number}", content_title=f"failover write {number}")
            try:
                writer.upsert([memory])
            except (BackendError, redis.RedisError) as exc:
                report.failed[type(exc).__name__] += 1
                report.failed_by_namespace[namespace] += 1
                continue
            report.acked[namespace].append(memory.id)
            if stop.is_set():
                return


def failover_run(cluster: RedisClusterSet, namespaces: list[str], warm_seconds: float = 1.0,
                 resume_writes: int = 5) -> FailoverReport:
    """Writes with the replica option round ``namespaces`` while the primary of the first
    one's shard is killed, its replica promoted and the old primary restarted; then
    every acknowledged write is looked for."""
    store = client_for(cluster.url)
    victim = cluster.primary_of(keys.memories(namespaces[0]))
    on_victim = [ns for ns in namespaces if cluster.primary_of(keys.memories(ns)) == victim]
    report = FailoverReport(victim, acked={ns: [] for ns in namespaces},
                            healthy=frozenset(ns for ns in namespaces if ns not in on_victim))
    stop = threading.Event()
    writer = threading.Thread(target=_write_round_robin, args=(store, namespaces, stop, report), daemon=True)
    writer.start()
    try:
        time.sleep(warm_seconds)
        report.acked_before_kill = sum(len(ids) for ids in report.acked.values())
        killed = cluster.kill(victim)
        promoted = cluster.wait_promoted(victim)
        report.promoted_after_s = promoted - killed
        cluster.restart(victim)
        cluster.wait_healthy()
        report.rejoined_after_s = time.monotonic() - promoted
        at_rejoin = {ns: len(report.acked[ns]) for ns in on_victim}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                any(len(report.acked[ns]) < at_rejoin[ns] + resume_writes for ns in on_victim):
            time.sleep(0.1)
        report.resumed_on_killed_shard = min(len(report.acked[ns]) - at_rejoin[ns] for ns in on_victim)
    finally:
        stop.set()
        writer.join(timeout=60)
    check = client_for(cluster.url)
    for namespace, ids in report.acked.items():
        for start in range(0, len(ids), 1000):
            part = ids[start:start + 1000]
            report.lost += sum(raw is None for raw in check.hmget(keys.memories(namespace), part))
    return report


class _Side:
    """One store (cluster or single Redis) with its own queue Redis and worker."""

    def __init__(self, name: str, store_url: str, workdir: Path) -> None:
        self.name = name
        self.queue = EmbeddedRedis(workdir / f"queue-{name}", port=free_port()).start()
        self.env = {**outside_env(), "FERRET_REDIS__URL": self.queue.url, "FERRET_BACKEND__LOCAL__STORE_URL": store_url}
        self.client = client_for(self.queue.url)
        self.store = client_for(store_url)
        self.producer = Producer(self.client, load_settings(environ=self.env))
        self.worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class",
                                        "simple"], env=self.env, stderr=(workdir / f"worker-{name}.log").open("wb"))
        deadline = time.monotonic() + 60
        while not workers_up(self.client) and time.monotonic() < deadline:
            time.sleep(0.05)

    def ask(self, query: str, namespace: str) -> str:
        handle = self.producer.enqueue({"query": query, "namespace": namespace, "deadline_seconds": 5,
                                        "options": {"cache": False}})
        return self.producer.wait(handle, 35).status

    def write_then_query(self, memory: Memory, query: str, namespace: str) -> tuple[float, str]:
        started = time.perf_counter()
        MemoryStore(self.store, namespace).upsert([memory])
        status = self.ask(query, namespace)
        return time.perf_counter() - started, status

    def stop(self) -> None:
        self.worker.terminate()
        wait_or_kill(self.worker, 60, f"the {self.name} worker did not stop")
        self.queue.stop()


EMBEDDING_DIMENSIONS = 384


class _RandomEmbedder:
    """Vectors of the semantic model's size, for sizing (their values do not matter)."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(1)

    def embed(self, texts: list[str], timeout: float | None = None) -> Any:
        return self.rng.standard_normal((len(texts), EMBEDDING_DIMENSIONS)).astype(np.float32)


def bytes_per_memory(store: redis.Redis, count: int = 20_000) -> dict[str, float]:
    """``used_memory`` growth per memory written, without and with embeddings."""
    figures: dict[str, float] = {}
    for name, embedder in (("plain", None), ("with_embedding", _RandomEmbedder())):
        memories = list(Corpus(seed=3).memories(count, prefix=name))
        before = int(store.info("memory")["used_memory"])
        MemoryStore(store, f"sizing-{name}", embedder=embedder).upsert(memories)  # type: ignore[arg-type]
        figures[f"{name}_bytes"] = round((int(store.info("memory")["used_memory"]) - before) / count)
        figures["json_bytes"] = round(sum(len(m.model_dump_json()) for m in memories) / count)
    return figures


def _load(store: redis.Redis, tenants: int, per_tenant: int, seed: int) -> float:
    corpus = Corpus(seed=seed)  # the same memories on both stores
    started = time.perf_counter()
    for t in range(tenants):
        MemoryStore(store, f"t{t}").upsert(corpus.memories(per_tenant, prefix=f"t{t}-"))
    return time.perf_counter() - started


def _spread(cluster: RedisClusterSet, store: redis.Redis, tenants: int) -> list[dict[str, Any]]:
    assert isinstance(store, RedisCluster)
    owners = Counter(store.get_node_from_key(keys.memories(f"t{t}")).port for t in range(tenants))
    rows = []
    for port, role in sorted(cluster.roles().items()):
        if role != "master":
            continue
        node = redis.Redis(port=port)
        rows.append({"primary": port, "tenants": owners[port],
                     "keys": int(node.dbsize()),
                     "used_memory_mb": round(int(node.info("memory")["used_memory"]) / 1e6, 1)})
    return rows


def run(tenants: int, per_tenant: int, cycles: int, rounds: int, warm_tenants: int,
        out: Path | None, log: Any = print) -> dict[str, Any]:
    report: dict[str, Any] = {"tenants": tenants, "memories_each": per_tenant}
    with tempfile.TemporaryDirectory(prefix="ferret-cluster-") as scratch:
        workdir = Path(scratch)
        cluster = RedisClusterSet(workdir / "cluster")
        single = EmbeddedRedis(workdir / "single", port=free_port()).start()
        sides: list[_Side] = []
        try:
            cluster_store, single_store = client_for(cluster.url), client_for(single.url)
            report["bytes_per_memory"] = bytes_per_memory(single_store)
            log(f"bytes per memory: {report['bytes_per_memory']}")
            for name in ("plain", "with_embedding"):
                single_store.delete(*(key(f"sizing-{name}") for key in (keys.memories, keys.embeddings,
                                                                         keys.changes, keys.memory_version)))
            report["load_s"] = {"cluster": round(_load(cluster_store, tenants, per_tenant, 5), 1),
                                "single": round(_load(single_store, tenants, per_tenant, 5), 1)}
            log(f"loaded {tenants} x {per_tenant} memories: {report['load_s']}")
            report["spread"] = _spread(cluster, cluster_store, tenants)
            report["single_used_memory_mb"] = round(int(single_store.info("memory")["used_memory"]) / 1e6, 1)
            log(f"spread: {report['spread']}; single Redis {report['single_used_memory_mb']} MB")
            sides = [_Side("cluster", cluster.url, workdir), _Side("single", single.url, workdir)]
            rng = np.random.default_rng(7)
            chosen = [f"t{int(t)}" for t in rng.choice(tenants, size=min(warm_tenants, tenants), replace=False)]
            corpus = Corpus(seed=9)
            for side in sides:  # every chosen tenant's index built on both workers first
                bad = [ns for ns in chosen if side.ask(corpus.query(), ns) != "ok"]
                if bad:
                    raise RuntimeError(f"{side.name}: warm-up queries failed for {bad[:5]}")
            times: dict[str, list[float]] = {"cluster": [], "single": []}
            failed: Counter[str] = Counter()
            number = 0
            for _ in range(rounds):  # A/B alternated: cluster then single, single then cluster
                for side in sides if _ % 2 == 0 else sides[::-1]:
                    for _cycle in range(cycles):
                        number += 1
                        namespace = chosen[int(rng.integers(0, len(chosen)))]
                        memory = next(iter(corpus.memories(1, prefix=f"new{number}-")))
                        elapsed, status = side.write_then_query(memory, corpus.query(), namespace)
                        times[side.name].append(elapsed * 1000)
                        failed[side.name] += status != "ok"
            report["write_then_query_ms"] = {
                name: {"p50": round(statistics.median(values), 2), "p90": round(percentile(values, 90), 2),
                       "n": len(values), "failed": failed[name]} for name, values in times.items()}
            report["ratio_p50"] = round(report["write_then_query_ms"]["cluster"]["p50"]
                                        / report["write_then_query_ms"]["single"]["p50"], 3)
            log(f"write-then-query: {report['write_then_query_ms']}; cluster/single p50 {report['ratio_p50']}")
            for side in sides:
                side.stop()
            sides = []
            failover = failover_run(cluster, [f"t{t}" for t in range(0, tenants, max(1, tenants // 60))])
            report["failover"] = failover.summary()
            log(f"failover: {report['failover']}")
        finally:
            for side in sides:
                side.stop()
            single.stop()
            cluster.stop()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2))
    return report
