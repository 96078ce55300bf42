"""The retrieval cache on a repeated batch: hit ratio and the time a hit costs.

Runs every query twice through the worker's job code in this process, against
a private redis-server: pass 1 fills the cache, pass 2 should be served from
it. Reports hit ratios per pass and median job times of misses and hits.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import private_redis
from ferret.contract import RetrievalRequest
from ferret.envelope import JobEnvelope
from ferret.job_ids import job_id_for
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from ferret.worker.core.resources import build_resources
from ferret.worker.core.run import run_job


def repeated_batch(memories: Mapping[str, Sequence[Memory]], queries: Sequence[tuple[str, str]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ferret-cache-") as home:
        server = private_redis(Path(home))
        try:
            client = redis.Redis.from_url(server.url)
            for namespace, items in memories.items():
                MemoryStore(client, namespace).upsert(items)
            ctx = build_resources(load_settings(environ={"FERRET_REDIS__URL": server.url}), client)
            passes = []
            for _ in (1, 2):
                hits, times, lookups = [], [], []
                for namespace, query in queries:
                    request = RetrievalRequest(query=query, namespace=namespace)
                    payload = JobEnvelope.new(request, 30).to_payload()
                    start = time.perf_counter()
                    result = run_job(ctx, payload, job_id_for(namespace, None)).result
                    times.append(time.perf_counter() - start)
                    hits.append(bool(result.stats.cache_hit))
                    lookups.append((result.stats.stage_ms or {}).get("cache", 0.0))
                passes.append({"hit_ratio": round(sum(hits) / len(hits), 4),
                               "median_job_ms": round(statistics.median(times) * 1000, 3),
                               "median_lookup_ms": round(statistics.median(lookups), 3)})
        finally:
            server.stop()
    return {"queries": len(queries), "first_pass": passes[0], "second_pass": passes[1],
            "hit_saves_ms": round(passes[0]["median_job_ms"] - passes[1]["median_job_ms"], 3)}
