"""`ferret bench lateness`, small: it runs, and what it measures is a partial job near its deadline."""

from __future__ import annotations

from ferret.bench.lateness import measure_lateness


def test_the_lateness_bench_reports_partial_jobs_that_end_within_a_second_of_their_deadline():
    report = measure_lateness(runs=3, deadline=0.5)
    assert report["statuses"] == {"partial": 3}
    assert report["late_ms_median"] <= report["late_ms_max"] < 1000
