"""The Nous backend down, slow or answering garbage: jobs degrade or fail clearly
within their deadline, the worker survives, and the errors are counted."""

from __future__ import annotations

import pytest

from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import free_port
from tests.integration.test_metrics import scrape


@pytest.mark.parametrize(("mode", "message"), [
    ("error500", "answered 500"),
    ("garbage", "invalid JSON"),
    ("wrong_types", "no 'data' list"),
    ("slow", "timed out"),
])
def test_faulty_backend(mode, message, sample_nous, producer, start_workers):
    port = free_port()
    start_workers(1, "--metrics-port", str(port), extra_env=nous_env(sample_nous, timeout_seconds=5))
    sample_nous.mode, sample_nous.delay = mode, 3.0
    failed = producer.wait(producer.enqueue({"query": "BTC thesis", "deadline_seconds": 1.0}), 20)
    assert failed.status == "failed" and message in failed.error
    assert failed.timestamps.finished_at - failed.timestamps.deadline_at < 1.0
    sample_nous.mode = "ok"
    healthy = producer.wait(producer.enqueue({"query": "BTC thesis"}), 20)
    assert healthy.status == "ok", "the worker survived and serves the next job"
    samples = scrape(port)
    outcome = "timeout" if mode == "slow" else "error"
    errors = samples[("ferret_backend_requests_total", (("backend", "nous"), ("outcome", outcome)))]
    assert errors == len(failed.stats.backend_calls) >= 1
