"""`ferret bench service` end to end, small: real redis-server, real worker processes."""

from __future__ import annotations

import pytest

from ferret.bench.service import markdown, paired_ratio, run_service_bench


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
        tail = row["ferret_fast"]["tail"]  # where the fast path's time went, the slowest job's too
        assert len(tail["slowest"]) == 1 and tail["slowest"][0]["total_ms"] >= tail["median"]["total_ms"]
        assert tail["index_loaded"] >= 1 and tail["warm_p99_ms"] > 0  # a new worker's first job loads the index
        for part in tail["slowest"]:
            assert part["queued_ms"] >= 0 and part["ran_ms"] > 0 and isinstance(part["spans"], dict)
            assert part["queued_ms"] + part["ran_ms"] + part["around_ms"] == pytest.approx(part["total_ms"], abs=0.05)
    table = markdown(report).split("\n")
    assert len([line for line in table if line.startswith("|")]) == 8  # header, rule, three systems x two counts
    assert len([line for line in table if line.startswith("- total ")]) == 2  # a slowest job per worker count


def test_the_throughput_ratio_is_the_median_of_the_rounds_own_ratios():
    # the medians of each system (300 / 200) would say 1.5; round by round it is 1.0
    assert paired_ratio([100.0, 300.0, 400.0], [100.0, 300.0, 200.0]) == 1.0
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])
