"""Hosts whose clocks disagree: every deadline is judged on Redis's clock.

A worker, or a producer, runs under libfaketime (Debian's ``faketime``) 30 s
ahead of or behind the host, against a real redis-server and real workers
of both classes. Each run: 20 prefetch jobs whose 1 s deadline passes while
no worker serves the queue (each must end ``expired``: a deadline stretched
by a clock behind would run them ``ok``), then 200 prefetch jobs at the
default deadline (each must end ``ok``: a clock ahead would expire them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from ferret.job_ids import job_id_for
from tests.conftest import ROOT, faketime_env

STALE, FRESH = 20, 200


def _lines(kind: str, count: int, deadline: float | None) -> list[dict[str, object]]:
    lines = []
    for i in range(count):
        request: dict[str, object] = {"query": f"SOL funding stop {i}", "namespace": "sample", "queue": "prefetch",
                                      "request_id": f"{kind}-{i}", "options": {"cache": False}}
        if deadline is not None:
            request["deadline_seconds"] = deadline
        lines.append(request)
    return lines


def _enqueue(env: dict[str, str], lines: list[dict[str, object]], tmp_path, name: str, skew: str | None) -> None:
    """Enqueue ``lines`` with ``ferret batch --wait 0``, ``skew`` off the host's clock when given."""
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    skewed = {**env, **faketime_env(skew)} if skew else env
    done = subprocess.run([sys.executable, "-m", "ferret.cli.main", "batch", str(path),
                           "--out", str(tmp_path / f"{name}.out"), "--wait", "0"],
                          env=skewed, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 5), done.stderr


def _statuses(producer, lines: list[dict[str, object]]) -> tuple[Counter[str], str]:
    """Final statuses, and one result's stamps to show when they are wrong."""
    statuses: Counter[str] = Counter()
    shown = ""
    for line in lines:
        result = producer.results.wait(job_id_for("sample", str(line["request_id"])), 60)
        statuses[result.status if result else "none"] += 1
        shown = shown or (f"{result.timestamps} on {result.worker}" if result else "")
    return statuses, shown


def _run(env, producer, start_workers, tmp_path, worker_skew: str | None, producer_skew: str | None) -> None:
    stale, fresh = _lines("stale", STALE, 1.0), _lines("fresh", FRESH, None)
    _enqueue(env, stale, tmp_path, "stale", producer_skew)
    time.sleep(1.5)  # their deadline passes before any worker serves the queue
    skewed = faketime_env(worker_skew) if worker_skew else {}
    start_workers(1, "prefetch", "--worker-class", "simple", extra_env=skewed)
    start_workers(1, "prefetch", "--worker-class", "fork", extra_env=skewed)
    _enqueue(env, fresh, tmp_path, "fresh", producer_skew)
    statuses, shown = _statuses(producer, stale)
    assert statuses == Counter(expired=STALE), f"a deadline was stretched: {shown}"
    statuses, shown = _statuses(producer, fresh)
    assert statuses == Counter(ok=FRESH), f"a job in time was judged late: {shown}"


@pytest.mark.parametrize("skew", ["+30s", "-30s"])
def test_a_worker_with_a_skewed_clock_judges_deadlines_on_redis_clock(env, producer, sample_namespace,
                                                                       start_workers, tmp_path, skew):
    _run(env, producer, start_workers, tmp_path, worker_skew=skew, producer_skew=None)


@pytest.mark.parametrize("skew", ["+30s", "-30s"])
def test_a_producer_with_a_skewed_clock_stamps_deadlines_on_redis_clock(env, producer, sample_namespace,
                                                                         start_workers, tmp_path, skew):
    _run(env, producer, start_workers, tmp_path, worker_skew=None, producer_skew=skew)
