"""``ferret bench breaker`` runs end to end and its figures hang together."""

from __future__ import annotations

from ferret.bench.breaker import run


def test_the_breaker_benchmark_trips_skips_and_recovers(redis_server):
    report = run(jobs=12, healthy_jobs=4, unguarded_jobs=2)
    assert report["all_ok"]
    assert report["hung_timeouts"] == 5 and report["hung_skipped"] == 7  # breaker.failures defaults to 5
    assert report["unguarded_p50_ms"] >= 1000  # every unguarded job waited the re-rank timeout
    assert report["recovered_rerank"] == 20 and report["breaker_keys_left"] == []
