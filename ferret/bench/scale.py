"""``ferret bench scale``: the local backend at the sizes its users reach.

For each size: synthetic memories of 50-300 words (a Zipf vocabulary, seeded)
are written to a JSONL file and loaded with ``ferret ingest`` (a subprocess,
whose peak RSS is measured; it streams and builds the index snapshot), then
one real worker (``--worker-class simple``) serves queries through Redis:
- the first query of the namespace on that fresh worker (it loads the snapshot);
- warm queries (cache off), p50;
- one new memory written, then a query, repeated: the query's p50;
- the worker's RSS after.
The tenants mode loads T namespaces of M memories, sets the index memory
bound, asks every tenant once (cold), then sends uniform traffic and reports
p50/p99 and the worker's RSS.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ferret.bench.common import outside_env, percentile, private_redis, wait_or_kill
from ferret.errors import ResultTimeout
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.redis_plumbing.redis_conn import client_for
from ferret.rq_layer.producer_side import workers_up
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

VOCABULARY = 30_000


def _words(rng: np.random.Generator) -> list[str]:
    syllables = ["ka", "lo", "mi", "ra", "te", "su", "ne", "po", "vi", "da", "ghe", "bru", "sto", "ple", "xan"]
    words: set[str] = set()
    while len(words) < VOCABULARY:
        count = int(rng.integers(2, 5))
        words.add("".join(syllables[int(i)] for i in rng.integers(0, len(syllables), count)))
    return sorted(words)


class Corpus:
    """Seeded synthetic memories: Zipf-distributed words, 50-300 words each."""

    def __init__(self, seed: int = 11) -> None:
        self.rng = np.random.default_rng(seed)
        self.words = _words(self.rng)
        ranks = np.arange(1, VOCABULARY + 1)
        weights = 1.0 / ranks
        self.p = weights / weights.sum()

    def memories(self, count: int, prefix: str = "m", block: int = 2_000) -> Iterator[Memory]:
        for start in range(0, count, block):
            lengths = self.rng.integers(50, 301, min(block, count - start))
            picks = self.rng.choice(VOCABULARY, size=int(lengths.sum()), p=self.p)
            offset = 0
            for n, length in enumerate(lengths):
                body = " ".join(self.words[int(i)] for i in picks[offset:offset + int(length)])
                offset += int(length)
                yield Memory(id=f"{prefix}{start + n}", content_title=body[:60], content_body=body)

    def query(self) -> str:
        # three mid-frequency words: what a question's content words look like
        return " ".join(self.words[int(i)] for i in self.rng.integers(50, 5000, 3))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _ingest(path: Path, namespace: str, env: dict[str, str]) -> dict[str, float]:
    started = time.perf_counter()
    log = path.with_suffix(".log")
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "ingest", str(path), "-n", namespace],
                                   env=env, stdout=sink, stderr=sink)
        _, status, usage = os.wait4(process.pid, 0)  # (its own peak RSS, not this process's)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"ferret ingest failed: {log.read_text()[-2000:]}")
    return {"ingest_s": round(time.perf_counter() - started, 1), "ingest_peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}


def _start_worker(env: dict[str, str], client: Any) -> subprocess.Popen[bytes]:
    before = workers_up(client)
    worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", "simple"],
                              env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while workers_up(client) <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    return worker


def _index_span_ms(producer: Producer, job_id: str) -> float | None:
    spans = producer.trace(job_id)["spans"]
    return next((float(span["duration_ms"]) for span in spans if span["name"] == "index"), None)


def _ask(producer: Producer, query: str, namespace: str, deadline: float = 5.0,
         jobs: list[str] | None = None) -> tuple[float, str, str | None]:
    """Enqueue and wait for one query: seconds, status, how its index was made ready
    (its job id appended to ``jobs`` when given)."""
    started = time.perf_counter()
    handle = producer.enqueue({"query": query, "namespace": namespace, "deadline_seconds": deadline,
                               "options": {"cache": False}})
    if jobs is not None:
        jobs.append(handle.job_id)
    try:
        result = producer.wait(handle, deadline + 30)
    except ResultTimeout:
        return time.perf_counter() - started, "lost", None
    elapsed = time.perf_counter() - started
    return elapsed, result.status, result.stats.index


def size_run(size: int, queries: int, writes: int, workdir: Path,
             settings_env: dict[str, str] | None = None) -> dict[str, Any]:
    corpus = Corpus()
    source = workdir / f"memories-{size}.jsonl"
    with source.open("w") as out:
        for memory in corpus.memories(size):
            out.write(memory.model_dump_json(exclude_none=True) + "\n")
    server = private_redis(workdir / f"redis-{size}")
    try:
        env = {**outside_env(), "FERRET_REDIS__URL": server.url, **(settings_env or {})}
        row: dict[str, Any] = {"memories": size, **_ingest(source, "scale", env)}
        source.unlink()
        client = client_for(server.url)
        producer = Producer(client, load_settings(environ=env))
        worker = _start_worker(env, client)
        try:
            first, status, how = _ask(producer, corpus.query(), "scale")
            row.update(first_query_ms=round(first * 1000, 1), first_status=status, first_index=how)
            warm = [_ask(producer, corpus.query(), "scale") for _ in range(queries)]
            row["warm_p50_ms"] = round(statistics.median(t for t, _, _ in warm) * 1000, 2)
            row["warm_failed"] = sum(s != "ok" for _, s, _ in warm)
            store = MemoryStore(client, "scale")
            after_write = []
            written_jobs: list[str] = []
            for memory in corpus.memories(writes, prefix="new"):
                store.upsert([memory])
                after_write.append(_ask(producer, corpus.query(), "scale", jobs=written_jobs))
            row["after_write_p50_ms"] = round(statistics.median(t for t, _, _ in after_write) * 1000, 2)
            row["after_write_failed"] = sum(s != "ok" for _, s, _ in after_write)
            row["after_write_index"] = sorted({h or "-" for _, _, h in after_write})
            # The job's ``index`` span: making the index ready, the write included (the trace's own figure).
            spans = [_index_span_ms(producer, job_id) for job_id in written_jobs]
            row["after_write_index_span_p50_ms"] = round(statistics.median(s for s in spans if s is not None), 3)
            row["worker_rss_mb"] = round(_rss_mb(worker.pid), 1)
        finally:
            worker.terminate()
            wait_or_kill(worker, 60, "the worker did not stop")
    finally:
        server.stop()
    return row


def tenants_run(tenants: int, per_tenant: int, bound_mb: int, queries: int, workdir: Path) -> dict[str, Any]:
    corpus = Corpus(seed=5)
    server = private_redis(workdir / "redis-tenants")
    try:
        env = {**outside_env(), "FERRET_REDIS__URL": server.url,
               "FERRET_BACKEND__LOCAL__INDEX_MEMORY_MB": str(bound_mb)}
        client = client_for(server.url)
        for t in range(tenants):
            MemoryStore(client, f"t{t}").upsert(corpus.memories(per_tenant))
        producer = Producer(client, load_settings(environ=env))
        worker = _start_worker(env, client)
        try:
            started_rss = _rss_mb(worker.pid)
            cold = [_ask(producer, corpus.query(), f"t{t}")[0] for t in range(tenants)]
            rng = np.random.default_rng(3)
            warm = [_ask(producer, corpus.query(), f"t{int(rng.integers(0, tenants))}") for _ in range(queries)]
            times = [t * 1000 for t, _, _ in warm]
            return {"tenants": tenants, "memories_each": per_tenant, "bound_mb": bound_mb,
                    "cold_p50_ms": round(statistics.median(cold) * 1000, 1),
                    "warm_p50_ms": round(statistics.median(times), 2), "warm_p99_ms": round(percentile(times, 99), 2),
                    "warm_failed": sum(s != "ok" for _, s, _ in warm),
                    "warm_index": sorted({h or "-" for _, _, h in warm}),
                    "worker_rss_start_mb": round(started_rss, 1), "worker_rss_end_mb": round(_rss_mb(worker.pid), 1)}
        finally:
            worker.terminate()
            wait_or_kill(worker, 60, "the worker did not stop")
    finally:
        server.stop()


def run(sizes: list[int], tenants: tuple[int, int] | None, bound_mb: int, queries: int, writes: int,
        out: Path | None, settings_env: dict[str, str] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {"sizes": [], "tenants": None}
    with tempfile.TemporaryDirectory(prefix="ferret-scale-") as scratch:
        workdir = Path(scratch)
        for size in sizes:
            row = size_run(size, queries, writes, workdir, settings_env)
            print(json.dumps(row), flush=True)
            report["sizes"].append(row)
        if tenants:
            report["tenants"] = tenants_run(tenants[0], tenants[1], bound_mb, queries, workdir)
            print(json.dumps(report["tenants"]), flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2))
    return report
