"""Service performance: Ferret's queue service against raw RQ, one run.

With a private redis-server and real worker processes (RQ ``SimpleWorker``
for both):
- throughput: N jobs are queued, then k workers drain them; rate = N /
  (last job end - first job start), from the jobs' own timestamps. Raw and
  Ferret rounds alternate; each system's median round is reported, and the
  throughput ratio is the median of the rounds' own ratios (a round's raw
  and Ferret runs are seconds apart, so they share the machine's load of
  the moment, which on a shared machine moves more than the ratio does);
- latency: with k idle workers, one job at a time is enqueued and waited for
  (RQ: its blocking result stream; Ferret: the producer's blocking wait);
- Ferret runs a fast-path query mix and a compound query mix.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import STOP_SECONDS, percentile, private_redis, sample_memories, summary_ms, wait_or_kill
from ferret.producer.client import Producer
from ferret.rq_layer.producer_side import workers_up
from ferret.rq_layer.raw_baseline import RawQueue, worker_command
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

NAMESPACE = "bench"
FAST = ("funding squeeze playbook", "BTC thesis", "lesson about stops", "SOL open interest signal")
COMPOUND = ("What's my BTC thesis and how did my last SOL trade go?", "BTC and SOL analysis",
            "What lessons did I learn about stops? Also, which breakouts did I miss?")
NO_CACHE = {"FERRET_CACHE__ENABLED": "false", "FERRET_CACHE__COALESCE": "false"}
DRAIN_SECONDS = 600  # a burst worker's whole round
JOB_WAIT_SECONDS = 120  # the longest one job of a latency run may take (a hang bound: busy is not broken)


SIGNING_KEY = "a-benchmark-signing-key-32-chars"


class Bench:
    def __init__(self, url: str, signing: bool = False) -> None:
        """``signing``: producer and workers sign jobs and results (security.signing_key)."""
        self.url = url
        self.client = redis.Redis.from_url(url)
        MemoryStore(self.client, NAMESPACE).upsert(sample_memories())
        # the cache would serve repeats without running the pipeline: off, to time the pipeline
        self.settings_env = {"FERRET_REDIS__URL": url, **NO_CACHE,
                             **({"FERRET_SECURITY__SIGNING_KEY": SIGNING_KEY} if signing else {})}
        self.producer = Producer(self.client, load_settings(environ=self.settings_env))
        self.raw_queue = RawQueue(self.client)

    def _worker(self, kind: str, burst: bool) -> subprocess.Popen[bytes]:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_SECURITY")}, **self.settings_env}
        if kind == "raw":
            args = worker_command(self.url, burst)
        else:
            args = [sys.executable, "-m", "ferret.cli.main", "worker", "--queues", "prefetch"]
            args += ["--burst"] if burst else []
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _drain(self, kind: str, workers: int) -> None:
        for process in [self._worker(kind, burst=True) for _ in range(workers)]:
            wait_or_kill(process, DRAIN_SECONDS, f"a burst {kind} worker did not finish")

    def raw_throughput(self, jobs: int, workers: int) -> float:
        queued = [self.raw_queue.enqueue_noop(i) for i in range(jobs)]
        self._drain("raw", workers)
        starts, ends = self.raw_queue.spans(queued)
        return len(ends) / (max(ends) - min(starts)).total_seconds()

    def ferret_throughput(self, queries: tuple[str, ...], jobs: int, workers: int) -> float:
        handles = [self.producer.enqueue({"query": queries[i % len(queries)], "namespace": NAMESPACE,
                                          "deadline_seconds": 600}) for i in range(jobs)]
        self._drain("ferret", workers)
        results = [self.producer.result(h) for h in handles]
        assert all(r is not None and r.status == "ok" for r in results), "every job must succeed"
        starts = [r.timestamps.started_at for r in results if r and r.timestamps.started_at]
        ends = [r.timestamps.finished_at for r in results if r and r.timestamps.finished_at]
        return len(results) / (max(ends) - min(starts))

    def _with_idle_workers(self, kind: str, workers: int, run: Callable[[], list[float]]) -> list[float]:
        before = workers_up(self.client)
        processes = [self._worker(kind, burst=False) for _ in range(workers)]
        try:
            deadline = time.monotonic() + 60
            while workers_up(self.client) < before + workers and time.monotonic() < deadline:
                time.sleep(0.02)
            return run()
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                wait_or_kill(process, STOP_SECONDS, f"a {kind} worker did not stop on SIGTERM")

    def raw_latency(self, runs: int, workers: int) -> list[float]:
        def run() -> list[float]:
            times = []
            for i in range(runs):
                start = time.perf_counter()
                assert self.raw_queue.wait(self.raw_queue.enqueue_noop(i), JOB_WAIT_SECONDS)
                times.append(time.perf_counter() - start)
            return times
        return self._with_idle_workers("raw", workers, run)

    def ferret_latency(self, queries: tuple[str, ...], runs: int, workers: int,
                       parts: list[dict[str, Any]] | None = None) -> list[float]:
        """Seconds from enqueue to the result in hand, one job at a time; ``parts`` (when given)
        gets each job's split of that time (``latency_parts``)."""
        def run() -> list[float]:
            times = []
            for i in range(runs):
                start = time.perf_counter()
                handle = self.producer.enqueue({"query": queries[i % len(queries)], "namespace": NAMESPACE})
                result = self.producer.wait(handle, JOB_WAIT_SECONDS)
                total = time.perf_counter() - start
                assert result is not None and result.status == "ok"
                times.append(total)
                if parts is not None:
                    parts.append({"total_ms": total * 1000, "job": handle, "result": result})
            return times
        times = self._with_idle_workers("ferret", workers, run)
        if parts is not None:
            for part in parts:
                part.update(latency_parts(part.pop("total_ms"), part.pop("result"),
                                          self.producer.trace(part.pop("job"))))
        return times


def latency_parts(total_ms: float, result: Any, trace: dict[str, Any]) -> dict[str, Any]:
    """Where one job's time went: ``queued`` (enqueue stamp to a worker's start, Redis's clock: the
    worker's wake-up and dequeue), ``ran`` (start to finish, its spans over 0.5 ms named in
    ``spans``) and ``around`` (the rest of the client's total: the enqueue's round trip, the
    result's notice and read)."""
    stamps = result.timestamps
    queued = (stamps.started_at - stamps.enqueued_at) * 1000
    ran = (stamps.finished_at - stamps.started_at) * 1000
    spans = {span["name"]: round(span["duration_ms"], 2) for span in trace.get("spans", [])
             if span["name"] not in ("job", "queue_wait") and span["duration_ms"] >= 0.5}
    return {"total_ms": round(total_ms, 2), "queued_ms": round(queued, 2), "ran_ms": round(ran, 2),
            "around_ms": round(total_ms - queued - ran, 2), "index": result.stats.index, "spans": spans}


def tail(parts: list[dict[str, Any]], share: float = 0.01) -> dict[str, Any]:
    """The median split of all jobs, the split of each of the slowest ``share`` of them, and the p99 of
    the jobs that found their namespace's index open (``stats.index`` warm: not a worker's first job
    there, which loads it)."""
    slowest = sorted(parts, key=lambda part: part["total_ms"], reverse=True)[:max(1, round(len(parts) * share))]
    warm = [part["total_ms"] for part in parts if part["index"] == "warm"]
    return {"median": {name: round(statistics.median(part[name] for part in parts), 2)
                       for name in ("total_ms", "queued_ms", "ran_ms", "around_ms")},
            "slowest": slowest, "index_loaded": len(parts) - len(warm),
            "warm_p99_ms": round(percentile(warm, 99), 3) if warm else None}


def _row(rates: list[float], latencies: list[float]) -> dict[str, Any]:
    return {"jobs_per_s": round(statistics.median(rates), 1), "rounds": [round(r, 1) for r in rates],
            **summary_ms(latencies)}


def paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    """Median of the rounds' own ratios."""
    return round(statistics.median(n / d for n, d in zip(numerators, denominators, strict=True)), 3)


def run_service_bench(jobs: int = 1000, latency_runs: int = 300, rounds: int = 5,
                      log: Callable[[str], None] = lambda s: None, signing: bool = False) -> dict[str, Any]:
    """``signing``: each round also runs the fast path with signed jobs and results, right
    before or after the unsigned one (alternating), for the cost of signing."""
    report: dict[str, Any] = {"worker_class": "SimpleWorker", "jobs": jobs, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="ferret-bench-") as home:
        server = private_redis(Path(home))
        try:
            bench = Bench(server.url)
            signed = Bench(server.url, signing=True) if signing else None
            for workers in (1, 2):
                log(f"throughput with {workers} worker(s)")
                raw_rates, fast_rates, compound_rates, signed_rates = [], [], [], []
                for number in range(1, rounds + 1):  # alternate, so noise hits all alike
                    log(f"  round {number}/{rounds}")
                    raw_rates.append(bench.raw_throughput(jobs, workers))
                    if signed is not None and number % 2 == 0:
                        signed_rates.append(signed.ferret_throughput(FAST, jobs, workers))
                    fast_rates.append(bench.ferret_throughput(FAST, jobs, workers))
                    if signed is not None and number % 2 == 1:
                        signed_rates.append(signed.ferret_throughput(FAST, jobs, workers))
                    compound_rates.append(bench.ferret_throughput(COMPOUND, jobs, workers))
                log(f"latency with {workers} worker(s)")
                raw = _row(raw_rates, bench.raw_latency(latency_runs, workers))
                fast_parts: list[dict[str, Any]] = []
                fast = _row(fast_rates, bench.ferret_latency(FAST, latency_runs, workers, fast_parts))
                fast["tail"] = tail(fast_parts)
                compound = _row(compound_rates, bench.ferret_latency(COMPOUND, latency_runs, workers))
                report[f"{workers}_workers"] = {
                    "raw_rq": raw, "ferret_fast": fast, "ferret_compound": compound,
                    "fast_throughput_ratio": paired_ratio(fast_rates, raw_rates),
                    "fast_throughput_ratio_rounds": [round(f / r, 3)
                                                     for f, r in zip(fast_rates, raw_rates, strict=True)],
                    "fast_p50_latency_ratio": round(fast["p50_ms"] / raw["p50_ms"], 3),
                }
                if signed_rates:
                    report[f"{workers}_workers"].update({
                        "signed_fast_jobs_per_s": round(statistics.median(signed_rates), 1),
                        "signing_throughput_ratio": paired_ratio(signed_rates, fast_rates),
                        "signing_throughput_ratio_rounds": [round(s / f, 3) for s, f in
                                                            zip(signed_rates, fast_rates, strict=True)]})
        finally:
            server.stop()
    return report


def markdown(report: dict[str, Any]) -> str:
    lines = ["| workers | system | jobs/s | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|---|"]
    for workers in (1, 2):
        row = report[f"{workers}_workers"]
        for name in ("raw_rq", "ferret_fast", "ferret_compound"):
            r = row[name]
            lines.append(f"| {workers} | {name} | {r['jobs_per_s']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |")
    for workers in (1, 2):
        found = report[f"{workers}_workers"]["ferret_fast"].get("tail")
        if not found:
            continue
        median = found["median"]
        lines.append(f"\nFast path, {workers} worker(s): a job's time, median: total {median['total_ms']} ms = "
                     f"queued {median['queued_ms']} + ran {median['ran_ms']} + around {median['around_ms']}; "
                     f"{found['index_loaded']} job(s) loaded the namespace's index, p99 of the others "
                     f"{found['warm_p99_ms']} ms; the slowest 1%:")
        for part in found["slowest"]:
            spans = ", ".join(f"{name} {ms}" for name, ms in part["spans"].items())
            lines.append(f"- total {part['total_ms']} ms = queued {part['queued_ms']} + ran {part['ran_ms']} "
                         f"({spans}) + around {part['around_ms']}, index {part['index']}")
    return "\n".join(lines)
