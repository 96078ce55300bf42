"""``ferret bench result-writes`` in CI size: both ways run end to end, every job ends ``ok``, and the writes
are a part of the worker's CPU."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_result_writes_reports_both_ways(env):
    run = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "result-writes", "--jobs", "40",
                          "--rounds", "2", "--memories", "300"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {"ok": 160}
    for way in ("own", "held"):
        assert len(report["rounds_run"][way]) == 2
        for row in report["rounds_run"][way]:
            assert 0 < row["writes_ms"] < row["worker_ms"]
    assert "held: writing results" in run.stdout and "own: writing results" in run.stdout
