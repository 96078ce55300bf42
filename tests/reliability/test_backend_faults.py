"""The Nous backend down, slow or answering garbage: jobs degrade or fail clearly
within their deadline, the worker survives, and the errors are counted."""

from __future__ import annotations

import pytest

from ferret.ingest import parse_memory_lines
from tests.conftest import SAMPLE
from tests.fakes.nous_server import FakeNous
from tests.integration.test_metrics import _free_port, scrape


@pytest.fixture
def nous():
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    fake = FakeNous(memories)
    yield fake
    fake.close()


@pytest.mark.parametrize(("mode", "message"), [
    ("error500", "answered 500"),
    ("garbage", "invalid JSON"),
    ("wrong_types", "no 'data' list"),
    ("slow", "timed out"),
])
def test_faulty_backend(mode, message, nous, producer, start_workers):
    port = _free_port()
    start_workers(1, "--metrics-port", str(port), extra_env={
        "FERRET_BACKEND__KIND": "nous", "FERRET_BACKEND__NOUS__BASE_URL": nous.base_url,
        "FERRET_BACKEND__NOUS__TIMEOUT_SECONDS": "5"})
    nous.mode, nous.delay = mode, 3.0
    failed = producer.wait(producer.enqueue({"query": "BTC thesis", "deadline_seconds": 1.0}), 20)
    assert failed.status == "failed" and message in failed.error
    assert failed.timestamps.finished_at - failed.timestamps.deadline_at < 1.0
    nous.mode = "ok"
    healthy = producer.wait(producer.enqueue({"query": "BTC thesis"}), 20)
    assert healthy.status == "ok", "the worker survived and serves the next job"
    samples = scrape(port)
    outcome = "timeout" if mode == "slow" else "error"
    errors = samples[("ferret_backend_requests_total", (("backend", "nous"), ("outcome", outcome)))]
    assert errors == len(failed.stats["backend_calls"]) >= 1
