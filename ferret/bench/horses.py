"""A forking worker's work horse kept for many jobs against RQ's horse forked for each one, beside a simple
worker (``ferret.rq_layer.kept_horse``).

On a private redis-server with a namespace of ``memories`` synthetic memories (cache off), one worker
process at a time drains ``jobs`` batch jobs enqueued at once: a simple worker, a forking worker with its
horse kept (``service.jobs_per_horse``, the setting's), and a forking worker with one horse a job
(``jobs_per_horse: 1``, RQ's own). The rounds rotate the order. Printed per worker: its CPU a job (the
worker's process with its work horses, the running one's and the finished ones') and jobs/s, as medians of
the rounds, and each forking worker's CPU a job over the simple worker's.

    ferret bench horses [--jobs 300] [--rounds 3] [--memories 1000]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from ferret.bench.common import outside_env, start_workers, stop_processes, tree_cpu_seconds
from ferret.bench.overhead import NAMESPACE, NO_CACHE, corpus_server
from ferret.bench.scale import Corpus
from ferret.producer.client import Producer
from ferret.settings import load_settings

WORKERS = {  # name: (worker class, settings)
    "simple": ("simple", {}),
    "fork, horse kept": ("fork", {}),
    "fork, a horse a job": ("fork", {"FERRET_SERVICE__JOBS_PER_HORSE": "1"}),
}
WARM_JOBS = 10


def _drain(producer: Producer, pid: int, corpus: Corpus, jobs: int, outcomes: Counter[str]) -> dict[str, float]:
    """``jobs`` batch jobs enqueued at once and waited for: the worker's CPU a job and jobs/s."""
    cpu, began = tree_cpu_seconds(pid), time.monotonic()
    handles = [producer.enqueue({"query": corpus.query(), "namespace": NAMESPACE, "queue": "batch",
                                 "deadline_seconds": 600}) for _ in range(jobs)]
    results = [producer.wait(handle, 600) for handle in handles]
    seconds, spent = time.monotonic() - began, tree_cpu_seconds(pid) - cpu
    outcomes.update(result.status if result is not None else "none" for result in results)
    return {"cpu_ms": spent / jobs * 1000, "jobs_per_s": jobs / seconds}


def run(jobs: int, rounds: int, memories: int) -> dict[str, Any]:
    corpus = Corpus()
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in WORKERS}
    outcomes: dict[str, Counter[str]] = {name: Counter() for name in WORKERS}
    with tempfile.TemporaryDirectory(prefix="ferret-bench-horses-") as home:
        server, client = corpus_server(Path(home), corpus, memories)
        base = {**outside_env(), "FERRET_REDIS__URL": server.url, **NO_CACHE}
        producer = Producer(client, load_settings(environ=base))
        try:
            names = list(WORKERS)
            for round_ in range(rounds):
                for name in names[round_ % len(names):] + names[:round_ % len(names)]:
                    kind, extra = WORKERS[name]
                    (worker,) = start_workers({**base, **extra}, 1, kind, client)
                    try:
                        _drain(producer, worker.pid, corpus, WARM_JOBS, Counter())  # the index opened
                        rows[name].append(_drain(producer, worker.pid, corpus, jobs, outcomes[name]))
                    finally:
                        stop_processes([worker], 30)
        finally:
            server.stop()
    medians = {name: {part: round(statistics.median(row[part] for row in runs), 3) for part in runs[0]}
               for name, runs in rows.items()}
    simple = medians["simple"]["cpu_ms"]
    return {"jobs": jobs, "rounds": rounds, "memories": memories, "workers": medians,
            "cpu_over_simple": {name: round(row["cpu_ms"] / simple, 2) for name, row in medians.items()},
            "rounds_run": rows, "outcomes": {name: dict(counts) for name, counts in outcomes.items()}}
