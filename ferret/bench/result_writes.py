"""What a worker spends writing results: held for the trip's end against each job's own write.

One simple worker in this process drains a deep batch queue of fresh queries (a namespace of synthetic
memories, cache off), in rounds that alternate the two ways of writing a batch job's result: held and
written with the trip's others in one pipeline (``ferret.worker.core.held_results``, the worker's way),
and written as each job ends (the way before, and still that of a prefetch job with others behind it). Each
round prints the CPU this process spent inside the writes (``ResultStore.write``, ``write_held`` and
``finish_held``, timed where they are called; the last sends RQ's success of the trip's jobs with their
results, so the held way's writes hold that too) and in the whole drain, a job's share of each; both are
this process's own CPU time, so the rest of the machine stays out of them (Redis's is not in them).

    ferret bench result-writes [--jobs 1500] [--rounds 3] [--memories 5000]
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ferret.bench.drain import drained, worker_in_process
from ferret.bench.overhead import NAMESPACE
from ferret.bench.scale import Corpus
from ferret.results import ResultStore
from ferret.rq_layer import trip_batching

WARM_JOBS = 50


@contextmanager
def _writes_timed() -> Iterator[list[float]]:
    """The CPU seconds spent inside result writes while in the block (a one-item list, read at the end)."""
    spent = [0.0]
    own, held, finish = ResultStore.write, trip_batching.write_held, trip_batching.finish_held

    def timed(write: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            began = time.process_time()
            try:
                return write(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - began
        return call

    ResultStore.write = timed(own)  # type: ignore[method-assign]
    trip_batching.write_held = timed(held)
    trip_batching.finish_held = timed(finish)
    try:
        yield spent
    finally:
        ResultStore.write = own  # type: ignore[method-assign]
        trip_batching.write_held = held
        trip_batching.finish_held = finish


def run(jobs: int, rounds: int, memories: int) -> dict[str, Any]:
    corpus = Corpus()
    rows: dict[str, list[dict[str, float]]] = {"held": [], "own": []}
    outcomes: Counter[str] = Counter()
    with worker_in_process(corpus, memories) as (_settings, producer, worker):
        def drain(way: str, count: int) -> dict[str, float]:
            worker.ferret_held_queue = trip_batching.HELD_QUEUE if way == "held" else None
            requests = [{"query": corpus.query(), "namespace": NAMESPACE, "queue": "batch", "deadline_seconds": 600}
                        for _ in range(count)]
            with _writes_timed() as spent:  # only the worker writes results: the enqueue and reads are not in it
                total = drained(producer, worker, requests, outcomes)
            return {"writes_ms": round(spent[0] / count * 1000, 3), "worker_ms": round(total / count * 1000, 3)}

        drain("held", WARM_JOBS)
        drain("own", WARM_JOBS)
        outcomes.clear()
        for _ in range(rounds):
            for way in ("own", "held"):
                rows[way].append(drain(way, jobs))
    medians = {way: {part: round(statistics.median(row[part] for row in runs), 3) for part in runs[0]}
               for way, runs in rows.items()}
    return {"jobs": jobs, "rounds": rounds, "memories": memories, "rounds_run": rows, "median": medians,
            "outcomes": dict(outcomes)}
