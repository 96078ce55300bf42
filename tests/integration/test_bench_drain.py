"""The benches of a worker's machinery (``ferret bench drain``, ``result-writes``, ``horses``,
``overhead``) in CI size: they run end to end, every job ends ``ok``, and they print their figures."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


def _bench(env: dict[str, str], name: str, jobs: int) -> tuple[str, dict[str, Any]]:
    """The bench's output, and its report (the last line), two rounds on 300 memories."""
    run = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", name, "--jobs", str(jobs),
                          "--rounds", "2", "--memories", "300"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, json.loads(run.stdout.strip().splitlines()[-1])


def test_bench_drain_reports_the_worker_against_the_pipeline(env):
    printed, report = _bench(env, "drain", 30)
    assert report["outcomes"] == {"ok": 120}  # the worker's jobs and the job core's, each to its result
    assert len(report["rounds_run"]) == 2
    for row in report["rounds_run"]:
        assert 0 < row["pipeline_ms"] < row["worker_ms"]  # a job is the pipeline and more
        assert row["job_core_ms"] > 0
        assert abs(row["over_pipeline"] - row["worker_ms"] / row["pipeline_ms"]) < 0.02
        assert abs(row["rq_layer_ms"] - (row["worker_ms"] - row["job_core_ms"])) < 0.002
    assert "median:" in printed and "RQ's layer" in printed


def test_bench_result_writes_reports_both_ways(env):
    """Both ways of writing a batch job's result, and the writes a part of the worker's CPU."""
    printed, report = _bench(env, "result-writes", 40)
    assert report["outcomes"] == {"ok": 160}
    for way in ("own", "held"):
        assert len(report["rounds_run"][way]) == 2
        for row in report["rounds_run"][way]:
            assert 0 < row["writes_ms"] < row["worker_ms"]
    assert "held: writing results" in printed and "own: writing results" in printed


def test_bench_horses_runs_each_worker_to_its_results(env):
    """The simple worker, the forking worker with its horse kept and with a horse a job: every job ``ok``,
    each figured."""
    run = subprocess.run([sys.executable, "-m", "ferret.cli.main", "bench", "horses", "--jobs", "20",
                          "--rounds", "1", "--memories", "300"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["outcomes"] == {name: {"ok": 20} for name in ("simple", "fork, horse kept", "fork, a horse a job")}
    for name, row in report["workers"].items():
        assert row["cpu_ms"] > 0 and row["jobs_per_s"] > 0, name
        assert f"{name}: {row['cpu_ms']} ms of CPU a job" in run.stdout


def test_bench_overhead_reports_batch_fast_path_and_agent_turn(env):
    """Each path's CPU against the in-process pipeline's, and each job's outcome: every batch line and
    prefetch ``ok``, every agent turn ``ok`` with the memory it wrote just before among its results."""
    printed, report = _bench(env, "overhead", 40)
    turns = 2 * (40 // 4)  # two rounds of a quarter of the jobs each
    assert report["outcomes"] == {"batch": {"ok": 80}, "batch_one_job_a_line": {"ok": 80}, "fast_path": {"ok": turns},
                                  "agent_turn": {"ok": turns, "fresh": turns}}
    cpu = report["cpu_ms_per_job"]
    base = cpu["in_process"]["total"]
    assert base > 0
    for kind in ("batch", "batch_one_job_a_line", "fast_path", "agent_turn"):
        row = cpu[kind]
        assert row["workers"] > 0 and row["producer"] > 0, kind
        assert abs(row["total"] - (row["workers"] + row["producer"] + row["redis"])) < 0.005, kind
        assert abs(report[f"{kind}_over_in_process"] - row["total"] / base) < 0.01, kind
        assert len(report["each_round_over_in_process"][kind]) == 2, kind
        # Redis's own count: a job's enqueue alone is more than five commands (RQ's, in the put script).
        assert report["redis_commands_per_job"][kind] > 5, kind
    # Lines in carriers (ferret.carriers): an RQ job's enqueue, start and end shared by 16 lines.
    commands = report["redis_commands_per_job"]
    assert commands["batch"] < commands["batch_one_job_a_line"], commands
    assert f"agent_turn: {cpu['agent_turn']['total']} ms a turn" in printed
    assert f"{report['redis_commands_per_job']['agent_turn']} Redis commands a turn" in printed
