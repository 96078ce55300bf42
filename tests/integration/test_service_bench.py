"""`ferret bench service` end to end, small: real redis-server, real worker processes."""

from __future__ import annotations

import pytest

from benchmarks.service import markdown, paired_ratio, run_service_bench


def test_the_service_bench_measures_both_systems_with_one_and_two_workers():
    report = run_service_bench(jobs=20, latency_runs=5, rounds=2)
    for workers in (1, 2):
        row = report[f"{workers}_workers"]
        for system in ("raw_rq", "ferret_fast", "ferret_compound"):
            assert row[system]["jobs_per_s"] > 0
            assert 0 < row[system]["p50_ms"] <= row[system]["p95_ms"] <= row[system]["p99_ms"]
        pairs = zip(row["ferret_fast"]["rounds"], row["raw_rq"]["rounds"], strict=True)
        assert len(row["raw_rq"]["rounds"]) == 2
        assert row["fast_throughput_ratio_rounds"] == pytest.approx([f / r for f, r in pairs], rel=0.01)
    assert markdown(report).count("\n") == 7  # header, rule, three systems x two worker counts


def test_the_throughput_ratio_is_the_median_of_the_rounds_own_ratios():
    # the medians of each system (300 / 200) would say 1.5; round by round it is 1.0
    assert paired_ratio([100.0, 300.0, 400.0], [100.0, 300.0, 200.0]) == 1.0
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])
