"""Helpers shared by the benchmarks: percentiles, a private redis-server."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import redis

from ferret.ingest import parse_memory_lines
from ferret.records import Memory
from ferret.redis_plumbing.embedded_redis import EmbeddedRedis
from ferret.rq_layer.producer_side import workers_up


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(percentile(ms, 95), 3),
            "p99_ms": round(percentile(ms, 99), 3), "n": len(ms)}


def outside_env() -> dict[str, str]:
    """This process's environment without Ferret's settings (``FERRET_*``): a bench's processes get only the
    settings the bench gives them."""
    return {name: value for name, value in os.environ.items() if not name.startswith("FERRET_")}


def _cpu_ticks(pid: int, fields: int) -> float:
    """The first ``fields`` CPU times of a process's /proc stat (user, system, then its waited-for children's
    user, system), in seconds."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in stat[11:11 + fields]) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time, its threads included (Linux's /proc)."""
    return _cpu_ticks(pid, 2)


def tree_cpu_seconds(pid: int) -> float:
    """A process's CPU time with its children's: those it has waited for (a forking worker's finished work
    horses) and those still running (a kept horse), theirs counted the same way."""
    total = _cpu_ticks(pid, 4)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        for child in children:
            try:
                total += tree_cpu_seconds(int(child))
            except FileNotFoundError:  # the child ended meanwhile (its time is in the waited-for part once reaped)
                continue
    return total


def commands_processed(client: redis.Redis) -> int:
    """The commands Redis has run (``total_commands_processed``: those a script runs included, and the
    reading itself once it has run); two readings' difference is what ran between them."""
    return int(client.info("stats")["total_commands_processed"])


def private_redis(directory: Path) -> EmbeddedRedis:
    """A throwaway redis-server on a unix socket in ``directory``."""
    return EmbeddedRedis(directory).start()


def sample_memories() -> list[Memory]:
    text = resources.files("ferret.data").joinpath("sample_memories.jsonl").read_text()
    memories, _ = parse_memory_lines(text.splitlines())
    return memories


STOP_SECONDS = 30  # a worker's warm shut-down finishes the job in hand first


def wait_or_kill(process: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    """Wait for a worker process; a stuck one is killed and fails the bench instead of hanging it."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise RuntimeError(f"{what} within {seconds:g} s (pid {process.pid}); killed") from None


def stop_processes(processes: Iterable[subprocess.Popen[bytes]], seconds: float = 10) -> None:
    """SIGTERM every process still running, then wait for each (killed past ``seconds``)."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_workers(env: dict[str, str], count: int, worker_class: str,
                  client: redis.Redis) -> list[subprocess.Popen[bytes]]:
    """``count`` quiet worker processes of ``worker_class``, once all are registered (one that exits
    at start fails the bench)."""
    workers = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q",
                                 "--worker-class", worker_class], env=env) for _ in range(count)]
    wait_for_workers(workers, client)
    return workers


def wait_for_workers(workers: list[subprocess.Popen[bytes]], client: redis.Redis) -> None:
    """Until every one of ``workers`` is registered (its start-up done); one that exits first fails the bench."""
    while workers_up(client) < len(workers):
        if any(worker.poll() is not None for worker in workers):
            raise RuntimeError("a worker exited at start")
        time.sleep(0.05)


def write_json(path: Path | None, data: object) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))
