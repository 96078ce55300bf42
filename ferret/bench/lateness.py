"""How late past its deadline a job can finish.

One worker, a Nous backend (the fake server, ``ferret.worker.fakes``) where one
sub-query of every compound job hangs for 5 s. Each job has a 0.5 s
deadline; we report how long after ``deadline_at`` its result was written
(``finished_at``), median and max over the runs.

    ferret bench lateness [--runs 30]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from ferret.bench.common import STOP_SECONDS, private_redis, sample_memories, wait_or_kill
from ferret.producer.client import Producer
from ferret.rq_layer.producer_side import workers_up
from ferret.settings import load_settings
from ferret.worker.fakes.nous_server import FakeNous

ROOT = Path(__file__).resolve().parents[1]
QUERY = "What's my BTC thesis and how did my last SOL trade go?"


def measure_lateness(runs: int, deadline: float) -> dict[str, object]:
    """Run ``runs`` compound jobs with one hung sub-query; how late each result was written."""
    fake = FakeNous(sample_memories())
    fake.slow_terms, fake.delay = {"sol"}, 5.0
    with tempfile.TemporaryDirectory(prefix="ferret-late-") as home:
        server = private_redis(Path(home))
        env = {**os.environ, "FERRET_REDIS__URL": server.url, "PYTHONPATH": str(ROOT),
               "FERRET_BACKEND__KIND": "nous", "FERRET_BACKEND__NOUS__BASE_URL": fake.base_url,
               "FERRET_BACKEND__NOUS__TIMEOUT_SECONDS": "30"}
        worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q"], env=env)
        try:
            client = redis.Redis.from_url(server.url)
            while workers_up(client) < 1:
                time.sleep(0.05)
            producer = Producer(client, load_settings(environ={"FERRET_REDIS__URL": server.url}))
            lateness, statuses = [], []
            for _ in range(runs):
                result = producer.wait(producer.enqueue({"query": QUERY, "deadline_seconds": deadline}), 30)
                if result.timestamps.finished_at is None:
                    raise RuntimeError("no finished result within 30 s")
                statuses.append(result.status)
                lateness.append((result.timestamps.finished_at - result.timestamps.deadline_at) * 1000)
        finally:
            worker.terminate()
            wait_or_kill(worker, STOP_SECONDS, "the worker did not stop on SIGTERM")
            server.stop()
            fake.close()
    return {"runs": runs, "deadline_s": deadline, "statuses": {s: statuses.count(s) for s in set(statuses)},
            "late_ms_median": round(statistics.median(lateness), 2), "late_ms_max": round(max(lateness), 2)}


def summary(report: dict[str, object]) -> str:
    return (f"finished after the deadline: median {report['late_ms_median']} ms, max {report['late_ms_max']} ms "
            f"over {report['runs']} jobs ({report['statuses']})")
