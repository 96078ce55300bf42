"""`ferret bench service` end to end, small: real redis-server, real worker processes."""

from __future__ import annotations

from ferret.bench.service import markdown, run_service_bench


def test_the_service_bench_measures_both_systems_with_one_and_two_workers():
    report = run_service_bench(jobs=20, latency_runs=5, rounds=1)
    for workers in (1, 2):
        row = report[f"{workers}_workers"]
        for system in ("raw_rq", "ferret_fast", "ferret_compound"):
            assert row[system]["jobs_per_s"] > 0
            assert 0 < row[system]["p50_ms"] <= row[system]["p95_ms"] <= row[system]["p99_ms"]
        assert row["fast_throughput_ratio"] == round(row["ferret_fast"]["jobs_per_s"] / row["raw_rq"]["jobs_per_s"], 3)
    assert markdown(report).count("\n") == 7  # header, rule, three systems x two worker counts
