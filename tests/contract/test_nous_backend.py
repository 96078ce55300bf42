"""The Nous client against the fake server's quirks and faults."""

from __future__ import annotations

import time

import pytest

from ferret.errors import BackendProtocolError, BackendUnavailable
from ferret.records import Filters, Memory
from ferret.settings import NousSettings, PipelineSettings
from worker.backends.nous import NousBackend
from worker.fakes.nous_server import FakeNous
from worker.pipeline.orchestrator import run_pipeline

CORPUS = [Memory(id=f"n{i}", content_title=f"bitcoin note {i}", content_body="bitcoin funding") for i in range(60)]


@pytest.fixture
def fake():
    server = FakeNous(CORPUS)
    yield server
    server.close()


@pytest.fixture
def nous(fake):
    client = NousBackend(NousSettings(base_url=fake.base_url, api_key="s3cret", timeout_seconds=1.0))
    yield client
    client.close()


def test_never_asks_for_more_than_33(fake, nous):
    hits = nous.search("bitcoin", 100, Filters())
    assert fake.max_limit_seen == 33
    assert len(hits) == 33 and all(h.score > 0 for h in hits)


def test_empty_result_without_qcs_key(nous):
    assert nous.search("xylophone", 10, Filters()) == []


def test_500_text_plain_is_unavailable(fake, nous):
    fake.mode = "error500"
    with pytest.raises(BackendUnavailable, match="500"):
        nous.search("bitcoin", 5, Filters())


def test_400_json_error_is_protocol_error_with_message(nous):
    with pytest.raises(BackendProtocolError, match="query is required"):
        nous.search("", 5, Filters())


def test_invalid_json_and_wrong_types_are_protocol_errors(fake, nous):
    fake.mode = "garbage"
    with pytest.raises(BackendProtocolError, match="invalid JSON"):
        nous.search("bitcoin", 5, Filters())
    fake.mode = "wrong_types"
    with pytest.raises(BackendProtocolError, match="data"):
        nous.search("bitcoin", 5, Filters())


def test_timeout_is_bounded(fake, nous):
    fake.mode, fake.delay = "slow", 2.0
    start = time.perf_counter()
    with pytest.raises(BackendUnavailable, match="timed out"):
        nous.search("bitcoin", 5, Filters(), timeout=0.3)
    assert time.perf_counter() - start < 1.5


def test_server_down_is_unavailable():
    client = NousBackend(NousSettings(base_url="http://127.0.0.1:9/v1", connect_timeout_seconds=0.2))
    with pytest.raises(BackendUnavailable):
        client.search("bitcoin", 5, Filters())


def test_auth_header_and_filters_sent(fake, nous):
    nous.search("bitcoin", 5, Filters(subtype="custom:lesson", cluster_ids=("c1",)))
    path, body = fake.requests[-1]
    assert path == "/v1/search" and body["subtype"] == "custom:lesson" and body["cluster_ids"] == ["c1"]
    assert fake.auth_headers[-1] == "Bearer s3cret"


def test_classify_failure_returns_none(fake, nous):
    assert nous.classify("BTC")["query_type"] == "LOOKUP"
    fake.mode = "error500"
    assert nous.classify("BTC") is None


def test_pipeline_degrades_when_nous_is_down(fake, nous):
    fake.mode = "error500"
    with pytest.raises(BackendUnavailable):
        run_pipeline("bitcoin", nous, PipelineSettings())
