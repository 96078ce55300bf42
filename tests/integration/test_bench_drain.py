"""``ferret bench drain`` in CI size: it runs end to end, every job ends ``ok``, and it prints its figures."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_drain_reports_the_worker_against_the_pipeline(env):
    run = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "drain", "--jobs", "30",
                          "--rounds", "2", "--memories", "300"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {"ok": 60}
    assert len(report["rounds_run"]) == 2
    for row in report["rounds_run"]:
        assert 0 < row["pipeline_ms"] < row["worker_ms"]  # a job is the pipeline and more
        assert abs(row["over_pipeline"] - row["worker_ms"] / row["pipeline_ms"]) < 0.02
    assert "median:" in run.stdout
