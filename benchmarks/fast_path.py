"""How much the pipeline adds over one backend search on the fast path.

A simple, non-compound query goes through every stage (classify, decompose,
complexity, search with quality gate, merge, replace, format). We time, in
one run and interleaved, the bare backend search and the whole pipeline,
and report medians of many runs and the difference.

    python -m benchmarks.fast_path [--runs 3000]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from benchmarks.common import ROOT
from ferret.ingest import parse_memory_lines
from ferret.settings import PipelineSettings
from worker.backends.memory import InMemoryBackend
from worker.pipeline.orchestrator import run_pipeline
from worker.pipeline.records import NO_FILTERS
from worker.pipeline.tracing import SpanCollector

QUERY = "funding squeeze playbook"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    args = parser.parse_args()
    memories, _ = parse_memory_lines((ROOT / "ferret/data/sample_memories.jsonl").read_text().splitlines())
    backend = InMemoryBackend(memories)
    settings = PipelineSettings()
    probe = run_pipeline(QUERY, backend, settings)
    assert not probe.stats.was_decomposed and probe.stats.retries == 0 and probe.hits
    searches, pipelines = [], []
    gc.disable()
    for _ in range(args.runs):
        start = time.perf_counter()
        backend.search(QUERY, settings.search_limit_per_query, NO_FILTERS)
        searches.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_pipeline(QUERY, backend, settings, tracer=SpanCollector())  # spans on, as in a worker
        pipelines.append(time.perf_counter() - start)
    gc.enable()
    search_ms = statistics.median(searches) * 1000
    pipeline_ms = statistics.median(pipelines) * 1000
    report = {
        "query": QUERY, "runs": args.runs, "memories": len(memories),
        "search_median_ms": round(search_ms, 4), "pipeline_median_ms": round(pipeline_ms, 4),
        "overhead_ms": round(pipeline_ms - search_ms, 4), "target_overhead_ms": 1.0,
    }
    print(f"fast path, {args.runs} runs each, medians:")
    print(f"  one backend search : {search_ms:.3f} ms")
    print(f"  whole pipeline     : {pipeline_ms:.3f} ms")
    print(f"  pipeline overhead  : {pipeline_ms - search_ms:.3f} ms (target < 1 ms)")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
