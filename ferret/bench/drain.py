"""A worker's machinery on its own: one simple worker draining a deep queue in this process.

On a private redis-server with a namespace of ``memories`` synthetic memories (``ferret bench scale``'s
corpus; 5,000: the local backend builds it in the job's process, no builder), a Ferret simple worker is built
in this process (as ``ferret worker`` builds it) and warmed; then, alternating per round:

- **in-process**: ``jobs`` fresh queries through the same pipeline on the same backend, one after another;
- **worker**: ``jobs`` more fresh queries enqueued as Ferret jobs, then drained (``burst``): the worker's
  whole job (take, start, envelope, pipeline, result and trace write, success, metrics);
- **job core**: ``jobs`` more enqueued the same way, their payloads read back from Redis first (not timed),
  each run by the job core the worker calls (``run_job``: envelope, pipeline, result document, result and
  trace write) with nothing of RQ around it: no take, no start or success bookkeeping, no observers. So the
  worker's figure less this one is what RQ's layer costs a job, and this one less the pipeline's is what
  Ferret's own job costs around its pipeline.

All three are this process's CPU time, so nothing else on the machine is in the figure (``ferret bench
overhead`` has the producer's and Redis's parts, with worker processes). Printed per round and as medians:
the pipeline's CPU a query, the worker's and the job core's CPU a job, the worker's over the pipeline's, and
the differences: the machinery a job carries, and the part of it that is RQ's layer.

    ferret bench drain [--jobs 2000] [--rounds 3] [--memories 5000]
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ferret.bench.overhead import NAMESPACE, NO_CACHE, corpus_server
from ferret.bench.scale import Corpus
from ferret.contract import RetrievalResult
from ferret.producer.client import JobHandle, Producer
from ferret.rq_layer.raw_baseline import taken_off_queue
from ferret.rq_layer.runner import build_worker
from ferret.settings import Settings, load_settings
from ferret.worker.core.run import run_job
from ferret.worker.pipeline.orchestrator import run_pipeline

WARM_JOBS = 50


@contextmanager
def worker_in_process(corpus: Corpus, memories: int) -> Iterator[tuple[Settings, Producer, Any]]:
    """A private redis-server whose namespace ``NAMESPACE`` holds ``memories`` of ``corpus`` (cache off), a
    producer and a simple worker built in this process on it; INFO logs off meanwhile."""
    logging.disable(logging.INFO)
    try:
        with tempfile.TemporaryDirectory(prefix="ferret-bench-in-process-") as home:
            server, client = corpus_server(Path(home), corpus, memories)
            try:
                settings = load_settings(environ={"FERRET_REDIS__URL": server.url, **NO_CACHE})
                yield settings, Producer(client, settings), build_worker(client, settings, worker_class="simple")
            finally:
                server.stop()
    finally:
        logging.disable(logging.NOTSET)


def drained(producer: Producer, worker: Any, requests: list[dict[str, Any]], outcomes: Counter[str]) -> float:
    """Enqueue ``requests`` and let ``worker`` drain them (burst): the CPU seconds this process spent in the
    drain. Each job's final status is counted in ``outcomes`` after ("none": no result)."""
    handles = _enqueued(producer, requests)
    began = time.process_time()
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
    spent = time.process_time() - began
    _count_outcomes(producer, handles, outcomes)  # after the CPU: a job that failed fast costs less than one that ran
    return spent


def core_run(producer: Producer, worker: Any, requests: list[dict[str, Any]], outcomes: Counter[str]) -> float:
    """Enqueue ``requests``, read their jobs' payloads back, take the entries off the queue, and run each payload
    through ``run_job`` in this process, as the worker would (``job core`` in the module): the CPU seconds the
    runs took. Each job's final status is counted in ``outcomes`` after ("none": no result)."""
    handles = _enqueued(producer, requests)
    work = taken_off_queue(producer.client, [handle.job_id for handle in handles])
    ctx = worker.ferret_context
    began = time.process_time()
    for job_id, origin, payload in work:
        run_job(ctx, payload, job_id, origin)
    spent = time.process_time() - began
    _count_outcomes(producer, handles, outcomes)
    return spent


def _enqueued(producer: Producer, requests: list[dict[str, Any]]) -> list[JobHandle]:
    """``requests`` enqueued side by side; a refused one raises its error."""
    handles = []
    for answer in producer.enqueue_many(requests):
        if isinstance(answer, Exception):
            raise answer
        handles.append(answer)
    return handles


def _count_outcomes(producer: Producer, handles: list[JobHandle], outcomes: Counter[str]) -> None:
    """Each job's final status counted in ``outcomes`` ("none": no result)."""
    outcomes.update(result.status if isinstance(result, RetrievalResult) else "none"
                    for result in producer.results_of(handles))


def run(jobs: int, rounds: int, memories: int) -> dict[str, Any]:
    corpus = Corpus()
    rows: list[dict[str, float]] = []
    with worker_in_process(corpus, memories) as (settings, producer, worker):
        def drain(queries: list[str]) -> float:
            return drained(producer, worker, [{"query": q, "namespace": NAMESPACE, "deadline_seconds": 600}
                                              for q in queries], outcomes)

        outcomes: Counter[str] = Counter()
        drain([corpus.query() for _ in range(WARM_JOBS)])
        outcomes.clear()
        backends = worker.ferret_context.backends  # type: ignore[attr-defined]
        for _ in range(rounds):
            queries = [corpus.query() for _ in range(jobs)]
            began = time.process_time()
            for query in queries:  # the namespace's index asked for each time, as ``bench overhead`` does
                run_pipeline(query, backends.for_namespace(NAMESPACE), settings.pipeline)
            pipeline_ms = (time.process_time() - began) / jobs * 1000
            worker_ms = drain([corpus.query() for _ in range(jobs)]) / jobs * 1000
            core_ms = core_run(producer, worker, [{"query": corpus.query(), "namespace": NAMESPACE,
                                                   "deadline_seconds": 600} for _ in range(jobs)],
                               outcomes) / jobs * 1000
            rows.append({"pipeline_ms": round(pipeline_ms, 3), "worker_ms": round(worker_ms, 3),
                         "job_core_ms": round(core_ms, 3),
                         "over_pipeline": round(worker_ms / pipeline_ms, 2),
                         "machinery_ms": round(worker_ms - pipeline_ms, 3),
                         "rq_layer_ms": round(worker_ms - core_ms, 3)})
    medians = {part: round(statistics.median(row[part] for row in rows), 3) for part in rows[0]}
    return {"jobs": jobs, "rounds": rounds, "memories": memories, "rounds_run": rows, "median": medians,
            "outcomes": dict(outcomes)}
