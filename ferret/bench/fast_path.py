"""Pipeline overhead over one backend search, and sub-query parallelism.

- Fast path: a simple, non-compound query goes through every stage; we time,
  interleaved in one run, the bare backend search and the whole pipeline
  (spans on, as in a worker) and report medians and the difference.
- Parallelism: a two-part compound query against a backend that takes 50 ms
  a search; one search, the compound pipeline, and the sum of its searches.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any

from ferret.bench.common import sample_memories
from ferret.records import NO_FILTERS
from ferret.settings import PipelineSettings
from ferret.tracing import SpanCollector
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.pipeline.orchestrator import run_pipeline

FAST_QUERY = "funding squeeze playbook"
COMPOUND_QUERY = "What's my BTC thesis and how did my last SOL trade go?"
SLOW_SEARCH_SECONDS = 0.05


def fast_path(runs: int = 3000) -> dict[str, Any]:
    backend = InMemoryBackend(sample_memories())
    settings = PipelineSettings()
    probe = run_pipeline(FAST_QUERY, backend, settings)
    assert not probe.stats.plan.was_decomposed and probe.stats.search.retries == 0 and probe.hits
    searches, pipelines = [], []
    gc.disable()
    try:
        for _ in range(runs):
            start = time.perf_counter()
            backend.search(FAST_QUERY, settings.search_limit_per_query, NO_FILTERS)
            searches.append(time.perf_counter() - start)
            start = time.perf_counter()
            run_pipeline(FAST_QUERY, backend, settings, tracer=SpanCollector())
            pipelines.append(time.perf_counter() - start)
    finally:
        gc.enable()
    search_ms, pipeline_ms = statistics.median(searches) * 1000, statistics.median(pipelines) * 1000
    return {"query": FAST_QUERY, "runs": runs, "search_median_ms": round(search_ms, 4),
            "pipeline_median_ms": round(pipeline_ms, 4), "overhead_ms": round(pipeline_ms - search_ms, 4),
            "target_overhead_ms": 1.0}


def parallelism(runs: int = 10) -> dict[str, Any]:
    backend = InMemoryBackend(sample_memories(), delay_seconds=SLOW_SEARCH_SECONDS)
    settings = PipelineSettings(max_replacements=0)  # time the searches, not replacement follow-ups
    singles, compounds, searches_per_job = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        backend.search(FAST_QUERY, 25, NO_FILTERS)
        singles.append(time.perf_counter() - start)
        before = backend.calls
        start = time.perf_counter()
        result = run_pipeline(COMPOUND_QUERY, backend, settings)
        compounds.append(time.perf_counter() - start)
        searches_per_job.append(backend.calls - before)
        assert len(result.stats.plan.sub_queries) == 2
    one, compound = statistics.median(singles) * 1000, statistics.median(compounds) * 1000
    searches = statistics.median(searches_per_job)
    return {"backend_latency_ms": SLOW_SEARCH_SECONDS * 1000, "one_search_ms": round(one, 2),
            "compound_ms": round(compound, 2), "searches_per_compound_job": searches,
            "sequential_would_be_ms": round(one * searches, 2), "compound_over_one_search": round(compound / one, 2)}


def main() -> None:
    report = fast_path()
    print(f"fast path medians: search {report['search_median_ms']:.3f} ms, pipeline "
          f"{report['pipeline_median_ms']:.3f} ms, overhead {report['overhead_ms']:.3f} ms (target < 1 ms)")


if __name__ == "__main__":
    main()
