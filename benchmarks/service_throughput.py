"""Ferret's queue service against raw RQ, same worker class, one run.

- throughput: N jobs are queued first, then one worker drains them; rate =
  N / (last job end - first job start), from the jobs' own timestamps.
  Raw and Ferret rounds alternate (``--rounds``, default 3) and the median
  round of each is reported, so a noisy neighbour hurts both alike;
- latency: with an idle worker running, one job at a time is enqueued and
  waited for (RQ: its blocking result stream; Ferret: the producer's
  blocking wait), M times: p50 / p95 / p99.

    python -m benchmarks.service_throughput [--jobs 1000] [--latency-runs 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis
from rq import Queue, Worker
from rq.job import Job
from rq.serializers import JSONSerializer

from benchmarks.common import ROOT, private_redis, summary_ms, write_json
from ferret.ingest import parse_memory_lines
from ferret.settings import load_settings
from producer.client import Producer
from worker.backends.local import MemoryStore

NAMESPACE = "bench"
QUERIES = ("funding squeeze playbook", "BTC thesis", "lesson about stops", "SOL open interest signal")


def _worker(url: str, kind: str, burst: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FERRET_REDIS__URL": url, "PYTHONPATH": str(ROOT)}
    if kind == "raw":
        code = ("import sys, redis; from rq import SimpleWorker, Queue; from rq.serializers import JSONSerializer;"
                "c = redis.Redis.from_url(sys.argv[1]);"
                "SimpleWorker([Queue('raw', connection=c, serializer=JSONSerializer)], connection=c,"
                " serializer=JSONSerializer).work(burst=sys.argv[2] == '1', logging_level='WARNING')")
        args = [sys.executable, "-c", code, url, "1" if burst else "0"]
    else:
        args = [sys.executable, "-m", "ferret.cli.main", "worker", "--queues", "prefetch"]
        args += ["--burst"] if burst else []
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _await_idle_worker(client: redis.Redis) -> None:
    deadline = time.monotonic() + 30
    while Worker.count(connection=client) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)


def raw_throughput(client: redis.Redis, url: str, jobs: int) -> float:
    queue = Queue("raw", connection=client, serializer=JSONSerializer)
    queued = [queue.enqueue_call("benchmarks.noop.noop", args=({"i": i},), result_ttl=600) for i in range(jobs)]
    _worker(url, "raw", burst=True).wait()
    fetched = Job.fetch_many([j.id for j in queued], connection=client, serializer=JSONSerializer)
    starts = [j.started_at for j in fetched if j and j.started_at]
    ends = [j.ended_at for j in fetched if j and j.ended_at]
    return len(ends) / (max(ends) - min(starts)).total_seconds()


def ferret_throughput(producer: Producer, url: str, jobs: int) -> float:
    handles = [producer.enqueue({"query": QUERIES[i % len(QUERIES)], "namespace": NAMESPACE,
                                 "deadline_seconds": 600}) for i in range(jobs)]
    _worker(url, "ferret", burst=True).wait()
    results = [producer.result(h) for h in handles]
    assert all(r is not None and r.status == "ok" for r in results), "every job must succeed"
    starts = [r.timestamps.started_at for r in results]
    ends = [r.timestamps.finished_at for r in results]
    return len(results) / (max(ends) - min(starts))


def raw_latency(client: redis.Redis, url: str, runs: int) -> list[float]:
    worker = _worker(url, "raw", burst=False)
    _await_idle_worker(client)
    queue = Queue("raw", connection=client, serializer=JSONSerializer)
    times = []
    try:
        for i in range(runs):
            start = time.perf_counter()
            job = queue.enqueue_call("benchmarks.noop.noop", args=({"i": i},), result_ttl=600)
            assert job.latest_result(timeout=10) is not None
            times.append(time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait()
    return times


def ferret_latency(client: redis.Redis, producer: Producer, url: str, runs: int) -> list[float]:
    worker = _worker(url, "ferret", burst=False)
    _await_idle_worker(client)
    times = []
    try:
        for i in range(runs):
            start = time.perf_counter()
            handle = producer.enqueue({"query": QUERIES[i % len(QUERIES)], "namespace": NAMESPACE})
            result = producer.wait(handle, 10)
            assert result is not None and result.status == "ok"
            times.append(time.perf_counter() - start)
    finally:
        worker.terminate()
        worker.wait()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--latency-runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ferret-bench-") as home:
        server = private_redis(Path(home))
        try:
            client = redis.Redis.from_url(server.url)
            memories, _ = parse_memory_lines((ROOT / "ferret/data/sample_memories.jsonl").read_text().splitlines())
            MemoryStore(client, NAMESPACE).upsert(memories)
            settings = load_settings(environ={"FERRET_REDIS__URL": server.url})
            producer = Producer(client, settings)
            raw_rates, ferret_rates = [], []
            for _ in range(args.rounds):
                raw_rates.append(raw_throughput(client, server.url, args.jobs))
                ferret_rates.append(ferret_throughput(producer, server.url, args.jobs))
            raw_rate, ferret_rate = statistics.median(raw_rates), statistics.median(ferret_rates)
            raw_lat = summary_ms(raw_latency(client, server.url, args.latency_runs))
            ferret_lat = summary_ms(ferret_latency(client, producer, server.url, args.latency_runs))
        finally:
            server.stop()
    report = {
        "worker_class": "SimpleWorker", "jobs": args.jobs, "rounds": args.rounds,
        "raw_rounds_jobs_per_s": [round(r, 1) for r in raw_rates],
        "ferret_rounds_jobs_per_s": [round(r, 1) for r in ferret_rates],
        "raw_rq": {"jobs_per_s": round(raw_rate, 1), **raw_lat},
        "ferret": {"jobs_per_s": round(ferret_rate, 1), **ferret_lat},
        "throughput_ratio": round(ferret_rate / raw_rate, 3),
        "p50_latency_ratio": round(ferret_lat["p50_ms"] / raw_lat["p50_ms"], 3),
        "targets": {"throughput_ratio_min": 0.8, "p50_latency_ratio_max": 2.0},
    }
    print(f"{'':<8} {'jobs/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name in ("raw_rq", "ferret"):
        row = report[name]
        print(f"{name:<8} {row['jobs_per_s']:>8} {row['p50_ms']:>8} {row['p95_ms']:>8} {row['p99_ms']:>8}")
    print(f"throughput ratio {report['throughput_ratio']} (target >= 0.8); "
          f"p50 latency ratio {report['p50_latency_ratio']} (target < 2)")
    print(json.dumps(report))
    write_json(args.json_out, report)


if __name__ == "__main__":
    main()
