"""What a prefetch job leaves in Redis, by key family.

``jobs`` distinct prefetch jobs (default settings: cache on, traces kept; a
long deadline, so that every job runs and none ends ``expired``) run
through a worker in this process (``SimpleWorker``, burst mode, local
backend) on a private redis-server. Every key is then measured with
``MEMORY USAGE`` (all of its elements sampled) and put in a family by its
name; the families' growth over the state before the jobs, divided by the
job count, is the footprint. The shared cache is reported but is held to
``cache.max_entries`` whatever the job count, so it is left out of the
per-job total the target is about. The in-flight slot (identical prefetch
requests coalesce on it) lives as long as the job's deadline: here an hour,
by default 5 s.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import private_redis, sample_memories
from ferret.producer.client import Producer
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

# (family, pattern), first match wins
FAMILIES: tuple[tuple[str, str], ...] = (
    ("ferret result", r"^ferret:result:"),
    ("ferret done token", r"^ferret:done:"),
    ("ferret trace", r"^ferret:trace:"),
    ("ferret request id", r"^ferret:ns:[^{][^:]*:request:"),
    ("ferret in-flight slot", r"^ferret:ns:[^{][^:]*:inflight:"),
    ("ferret cache (capped)", r"^ferret:(ns:[^{][^:]*:cache:|cache-index$)"),
    ("ferret memory store", r"^ferret:ns:\{"),
    ("rq result stream", r"^rq:results:"),
    ("rq job hash", r"^rq:job:"),
    ("rq execution", r"^rq:execution"),
    ("rq registries", r"^rq:(finished|failed|started|deferred|scheduled|canceled|wip):"),
    ("rq queues and workers", r"^rq:"),
    ("other ferret", r"^ferret:"),
)
CAPPED = frozenset({"ferret cache (capped)"})


def family(key: str) -> str:
    for name, pattern in FAMILIES:
        if re.search(pattern, key):
            return name
    return "other"


def bytes_by_family(client: redis.Redis) -> dict[str, int]:
    sizes: dict[str, int] = defaultdict(int)
    for key in client.scan_iter(count=1000):
        name = key.decode(errors="replace")
        usage = client.memory_usage(name, samples=0)
        sizes[family(name)] += int(usage or 0)
    return dict(sizes)


def measure(jobs: int = 2_000, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Bytes per prefetch job by key family, and the total with and without the capped cache."""
    with tempfile.TemporaryDirectory(prefix="ferret-footprint-") as home:
        server = private_redis(Path(home))
        try:
            client = redis.Redis.from_url(server.url)
            MemoryStore(client, "bench").upsert(sample_memories())
            settings = load_settings(environ={"FERRET_REDIS__URL": server.url, **(environ or {})})
            before = bytes_by_family(client)
            producer = Producer(client, settings)
            handles = [producer.enqueue({"query": f"funding squeeze playbook {number}", "namespace": "bench",
                                         "queue": "prefetch", "deadline_seconds": 3600})  # all run, none expire
                       for number in range(jobs)]
            build_worker(client, settings, worker_class="simple").work(
                burst=True, logging_level="WARNING", with_scheduler=False)
            after = bytes_by_family(client)
            statuses = Counter(result.status for handle in handles if (result := producer.result(handle)))
        finally:
            server.stop()
    per_job = {name: round((after.get(name, 0) - before.get(name, 0)) / jobs)
               for name in sorted(set(after) | set(before))}
    per_job = {name: value for name, value in per_job.items() if value}
    return {"jobs": jobs, "statuses": dict(statuses), "bytes_per_job": per_job,
            "total": sum(per_job.values()),
            "total_without_capped": sum(v for k, v in per_job.items() if k not in CAPPED)}
