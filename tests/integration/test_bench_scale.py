"""``ferret bench scale`` in CI size: it runs end to end and reports what the issue's targets are about."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_scale_reports_every_figure(env, tmp_path):
    run = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "scale", "--sizes", "600",
                          "--tenants", "6x40", "--queries", "6", "--writes", "3", "--out", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads((tmp_path / "scale.json").read_text())
    (size,) = report["sizes"]
    assert size["memories"] == 600 and size["first_status"] == "ok" and size["first_index"] == "built"
    assert size["warm_failed"] == 0 and size["after_write_failed"] == 0
    assert size["after_write_index"] == ["caught_up"], "each query after a write applied just that write"
    for figure in ("ingest_peak_rss_mb", "first_query_ms", "warm_p50_ms", "after_write_p50_ms", "worker_rss_mb"):
        assert size[figure] > 0, figure
    tenants = report["tenants"]
    assert tenants["tenants"] == 6 and tenants["warm_failed"] == 0 and tenants["warm_p99_ms"] > 0
