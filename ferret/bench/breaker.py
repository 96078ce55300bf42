"""What a hung chat endpoint costs each job, with and without the circuit breaker.

One worker in this process (``SimpleWorker``, burst mode, local backend)
on a private redis-server serves prefetch jobs that ask for the LLM
re-rank, against the fake chat server (``ferret.worker.fakes``) with a 1 s re-rank
timeout and the default breaker settings:

1. healthy: the endpoint answers at once;
2. hung: the endpoint never answers in time (``jobs`` jobs), breaker on;
3. the same with the breaker off (fewer jobs: each waits the timeout);
4. recovered: the endpoint answers again; after the cool-down, how many
   jobs it takes until the re-rank is ``ok`` again, and whether any
   breaker state is left in Redis.

A job's time is its worker's (``finished_at - started_at``, Redis's clock).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import private_redis, sample_memories
from ferret.producer.client import Producer
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from ferret.worker.fakes.chat_server import FakeChat


def _run(url: str, chat: FakeChat, jobs: int, breaker: bool, first: int) -> list[Any]:
    settings = load_settings(environ={
        "FERRET_REDIS__URL": url, "FERRET_RERANK__ENABLED": "true", "FERRET_RERANK__BASE_URL": chat.base_url,
        "FERRET_RERANK__TIMEOUT_SECONDS": "1", "FERRET_BREAKER__ENABLED": str(breaker).lower()})
    client = redis.Redis.from_url(url)
    producer = Producer(client, settings)
    handles = [producer.enqueue({"query": f"BTC funding squeeze {first + n}", "namespace": "bench",
                                 "deadline_seconds": 3600, "options": {"rerank": True, "cache": False}})
               for n in range(jobs)]
    build_worker(client, settings, worker_class="simple").work(burst=True, logging_level="ERROR",
                                                               with_scheduler=False)
    return [producer.result(handle) for handle in handles]


def _ms(results: list[Any]) -> list[float]:
    return [(r.timestamps.finished_at - r.timestamps.started_at) * 1000 for r in results]


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else float("nan")


def run(jobs: int = 200, healthy_jobs: int = 100, unguarded_jobs: int = 10) -> dict[str, Any]:
    chat = FakeChat(favourite={"funding"})
    with tempfile.TemporaryDirectory(prefix="ferret-breaker-") as home:
        server = private_redis(Path(home))
        try:
            client = redis.Redis.from_url(server.url)
            MemoryStore(client, "bench").upsert(sample_memories())
            cooldown = load_settings(environ={}).breaker.cooldown_seconds
            healthy = _run(server.url, chat, healthy_jobs, True, 0)
            chat.mode, chat.delay = "slow", 60.0
            hung = _run(server.url, chat, jobs, True, 10_000)
            opened = [r for r in hung if r.stats.rerank == "circuit_open"]
            client.delete(*client.keys("ferret:breaker:*"))  # the unguarded run starts closed, as if never tripped
            unguarded = _run(server.url, chat, unguarded_jobs, False, 20_000)
            chat.mode = "ok"
            time.sleep(cooldown + 0.5)
            recovered = _run(server.url, chat, 20, True, 30_000)
            left = [key.decode() for key in client.scan_iter("ferret:breaker:*")]
        finally:
            server.stop()
            chat.close()
    healthy_p50 = _p50(_ms(healthy))
    open_p50 = _p50(_ms(opened))
    return {
        "healthy_p50_ms": healthy_p50,
        "hung_jobs": jobs,
        "hung_timeouts": sum(r.stats.rerank == "timeout" for r in hung),
        "hung_skipped": len(opened),
        # the hung job (from 0, in queue order) whose call was first skipped: the one after breaker.failures
        "hung_first_skipped": next((n for n, r in enumerate(hung) if r.stats.rerank == "circuit_open"), None),
        "hung_p50_ms": _p50(_ms(hung)),
        "open_p50_ms": open_p50,
        "open_over_healthy": round(open_p50 / healthy_p50, 3),
        "unguarded_jobs": unguarded_jobs,
        "unguarded_p50_ms": _p50(_ms(unguarded)),
        "all_ok": all(r.status == "ok" for r in healthy + hung + unguarded + recovered),
        "recovered_rerank": [r.stats.rerank for r in recovered].count("ok"),
        "breaker_keys_left": left,
    }
