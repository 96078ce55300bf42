"""10,000 jobs through 2 workers: one final status each, and Redis, the batch
summary and the metrics agree."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

from ferret.contract import RetrievalResult
from ferret.packed import unpack
from tests.conftest import free_port
from tests.integration.test_metrics import scrape

JOBS = 10_000
QUERIES = ["BTC thesis", "What's my BTC thesis and how did my last SOL trade go?", "funding squeeze playbook",
           "What's the plan for tomorrow's coffee with Anna about ETH?"]


def test_ten_thousand_jobs(tmp_path, env, sample_namespace, start_workers, redis_client):
    ports = [free_port(), free_port()]
    for port in ports:
        start_workers(1, "--metrics-port", str(port))
    lines = [json.dumps({"query": QUERIES[i % len(QUERIES)], "namespace": sample_namespace,
                         **({"deadline_seconds": 0.000001} if i % 500 == 0 else {})}) for i in range(JOBS)]
    lines[123] = '{"query": ""}'  # one invalid line, never enqueued
    source, out = tmp_path / "load.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    batch = subprocess.run([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out", str(out)],
                           env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    # exit 1, "done in part": the invalid line and the jobs whose deadline had passed (ferret.cli.exit_codes)
    assert batch.returncode == 1, batch.stderr[-2000:]
    summary = json.loads(batch.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == JOBS and len({r["request_id"] for r in rows}) == JOBS

    in_redis: Counter[str] = Counter()
    for key in redis_client.scan_iter("ferret:result:*", count=1000):
        in_redis[RetrievalResult.model_validate_json(unpack(redis_client.get(key), 1 << 24)).status] += 1
    from_file = Counter(r["status"] for r in rows)
    time.sleep(0.5)
    metrics: Counter[str] = Counter()
    for port in ports:
        for (name, labels), value in scrape(port).items():
            if name == "ferret_jobs_total":
                metrics[dict(labels)["status"]] += int(value)
    metrics = +metrics

    enqueued = JOBS - 1
    assert sum(in_redis.values()) == enqueued
    assert summary["by_status"] == dict(from_file)
    assert from_file["failed"] == in_redis["failed"] + 1  # the invalid line is failed in the file only
    assert dict(metrics) == dict(in_redis), (metrics, in_redis)
    assert in_redis["expired"] == JOBS // 500
    print(f"\n10,000 jobs in {took:.1f}s: {dict(from_file)}")
