"""Live workers under overload: does any job end blaming a death that did not happen?

Two workers (real processes) on a private redis-server serve prefetch jobs
(5 s deadlines; synthetic queries on a namespace of ``memories`` synthetic
memories, as ``ferret bench scale`` makes them) sent at the edge of their capacity, while ``hogs`` busy
processes take the CPU (default two per core). No worker is killed or
stopped during the run, so a result whose error says "worker lost" (or
"work horse died") is a false loss. The capacity is measured first: the
same workers drain a burst of jobs under the same hogs; the soak then sends
at ``load`` x that rate, open loop, from one producer.

    ferret bench soak [--jobs 60000] [--hogs 4] [--load 1.0] [--worker-class simple] [--memories 10000]

Printed: jobs/s sent and the capacity, final statuses, errors by kind, the
false losses, jobs that never got a final status (must be 0), workers' and
Redis's CPU per job.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import redis

from ferret.bench.common import cpu_seconds, private_redis, start_workers, stop_processes
from ferret.bench.scale import Corpus
from ferret.producer.client import Producer
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore

FALSE_LOSS = ("worker lost", "work horse died")
CALIBRATION_JOBS = 1_000


def _hog() -> None:
    while True:
        pass


def _payload(corpus: Corpus) -> dict[str, Any]:
    return {"query": corpus.query(), "namespace": "soak", "queue": "prefetch"}


def _calibrate(producer: Producer, corpus: Corpus) -> float:
    """Jobs/s the workers drain from a full queue (the hogs running), once their indexes are warm."""
    for handle in [producer.enqueue({**_payload(corpus), "deadline_seconds": 3600}) for _ in range(20)]:
        producer.wait(handle, 600)
    handles = [producer.enqueue({**_payload(corpus), "deadline_seconds": 3600}) for _ in range(CALIBRATION_JOBS)]
    started = time.monotonic()
    for handle in handles:
        producer.wait(handle, 600)
    return CALIBRATION_JOBS / (time.monotonic() - started)


def run(jobs: int, hogs: int, load: float, worker_class: str, memories: int, workers: int = 2) -> dict[str, Any]:
    hog_processes = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for process in hog_processes:
        process.start()
    try:
        with tempfile.TemporaryDirectory(prefix="ferret-soak-") as home:
            server = private_redis(Path(home))
            env = {**os.environ, "FERRET_REDIS__URL": server.url}
            client = redis.Redis.from_url(server.url)
            corpus = Corpus()
            MemoryStore(client, "soak").upsert(list(corpus.memories(memories)))
            settings = load_settings(environ={"FERRET_REDIS__URL": server.url})
            producer = Producer(client, settings)
            running = start_workers(env, workers, worker_class, client)
            try:
                capacity = _calibrate(producer, corpus)
                rate = capacity * load
                cpu_before = {p.pid: cpu_seconds(p.pid) for p in running}
                redis_before = cpu_seconds(server.process.pid)  # type: ignore[union-attr]
                handles = []
                started = time.monotonic()
                for number in range(jobs):
                    due = started + number / rate
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    handles.append(producer.enqueue(_payload(corpus)))
                sent_for = time.monotonic() - started
                results = [producer.wait(handle, 120) for handle in handles]
                worker_cpu = sum(cpu_seconds(p.pid) - cpu_before[p.pid] for p in running)
                redis_cpu = cpu_seconds(server.process.pid) - redis_before  # type: ignore[union-attr]
                alive = all(p.poll() is None for p in running)
            finally:
                stop_processes(running, 30)
                server.stop()
    finally:
        for process in hog_processes:
            process.kill()
    statuses = Counter(result.status if result else "none" for result in results)
    errors = Counter(re.sub(r"\d+(\.\d+)?", "N", result.error)[:90] for result in results if result and result.error)
    false_losses = len([result for result in results
                        if result and result.error and result.error.startswith(FALSE_LOSS)])
    return {"jobs": jobs, "hogs": hogs, "cores": os.cpu_count(), "worker_class": worker_class,
            "workers": workers, "memories": memories, "capacity_jobs_per_s": round(capacity, 1),
            "sent_jobs_per_s": round(jobs / sent_for, 1),
            "minutes": round(sent_for / 60, 1), "statuses": dict(statuses), "errors": dict(errors.most_common(8)),
            "false_losses": false_losses, "no_final_status": statuses.get("none", 0),
            "workers_alive_at_end": alive,
            "worker_cpu_ms_per_job": round(worker_cpu / jobs * 1000, 2),
            "redis_cpu_ms_per_job": round(redis_cpu / jobs * 1000, 2)}
