"""The Nous client against the fake server's quirks and faults."""

from __future__ import annotations

import time

import pytest

from ferret.errors import BackendProtocolError, BackendUnavailable
from ferret.records import Filters, Memory
from ferret.settings import NousSettings, PipelineSettings
from ferret.worker.backends.nous import NousBackend
from ferret.worker.fakes.nous_server import FakeNous
from ferret.worker.pipeline.orchestrator import run_pipeline

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
    with pytest.raises(BackendProtocolError, match="query string is required"):
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


# A node exactly as the real nous-server sent it for a memory created through its API
# without body, summary, embedding or event times (seen against the TypeScript server).
REAL_NODE = {
    "id": "n_7f3a", "type": "concept", "subtype": "custom:thesis", "content_title": "BTC halving thesis",
    "content_summary": None, "content_body": None, "embedding_vector": None, "temporal_event_time": None,
    "temporal_event_start": None, "temporal_event_end": None, "provenance_created_at": "2026-11-01T10:00:00Z",
    "state_lifecycle": "ACTIVE", "cluster_ids": None, "neural_stability": 0.41, "neural_retrievability": 0.97,
    "layer": "semantic", "version": 3, "memory_section": "KNOWLEDGE", "score": 0.62,
    "breakdown": {"keyword": 0.62}, "primary_signal": "keyword",
}


def test_a_node_as_the_real_server_sends_it_is_a_hit():
    from ferret.worker.backends.nous import _to_hit

    hit = _to_hit(REAL_NODE)
    memory = hit.memory
    assert hit.score == 0.62 and memory.content_title == "BTC halving thesis"
    assert memory.content_body == "" and memory.content_summary == "" and memory.cluster_ids == ()
    assert memory.memory_section is not None and memory.memory_section.value == "KNOWLEDGE"


@pytest.mark.parametrize(("field", "value"), [("id", None), ("content_title", 7), ("score", None)])
def test_what_is_really_malformed_is_refused_naming_the_field(field, value):
    from ferret.worker.backends.nous import _to_hit

    node = {**REAL_NODE, field: value}
    if field == "content_title":
        node["content_summary"] = node["content_body"] = None
    with pytest.raises(BackendProtocolError) as refused:
        _to_hit(node)
    assert field in str(refused.value) or (field == "score" and "score" in str(refused.value))


def test_searches_succeed_on_nodes_full_of_nulls(fake, nous):
    sparse = FakeNous([Memory(id="s1", content_title="solana staking note", subtype="custom:trade_entry")])
    try:
        client = NousBackend(NousSettings(base_url=sparse.base_url))
        [hit] = client.search("solana staking", 5, Filters())
        assert hit.memory.content_body == "" and hit.memory.memory_section is not None
        assert hit.memory.memory_section.value == "EPISODIC"  # the section the server gave
        client.close()
    finally:
        sparse.close()


# The fake's quirks, seen over raw HTTP as the real server shows them.
def _raw_search(fake, **body):
    import httpx
    answer = httpx.post(f"{fake.base_url}/search", json={"query": "bitcoin", "limit": 10} | body)
    return answer


def test_fake_ignores_one_sided_time_range_and_lowercase_lifecycle():
    dated = [Memory(id="old", content_title="bitcoin old", temporal_event_time="2020-01-01T00:00:00Z",
                    state_lifecycle="DORMANT"),
             Memory(id="new", content_title="bitcoin new", temporal_event_time="2026-01-01T00:00:00Z")]
    server = FakeNous(dated)
    try:
        one_sided = _raw_search(server, time_range={"start": "2025-01-01T00:00:00Z"}).json()
        assert {n["id"] for n in one_sided["data"]} == {"old", "new"}
        both = _raw_search(server, time_range={"start": "2025-01-01T00:00:00Z", "end": "2027-01-01T00:00:00Z"})
        assert {n["id"] for n in both.json()["data"]} == {"new"}
        assert _raw_search(server, lifecycle="dormant").json()["data"] == []
        assert [n["id"] for n in _raw_search(server, lifecycle="DORMANT").json()["data"]] == ["old"]
    finally:
        server.close()


def test_fake_scores_drift_and_malformed_body_is_plain_500(fake):
    weak = "bitcoin zebra pancake"
    first = _raw_search(fake, query=weak).json()["data"][0]["score"]
    for _ in range(5):
        _raw_search(fake, query=weak)
    assert 0 < _raw_search(fake, query=weak).json()["data"][0]["score"] - first <= 0.01
    import httpx
    broken = httpx.post(f"{fake.base_url}/search", content=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status_code == 500 and broken.headers["content-type"].startswith("text/plain")


def test_one_sided_range_and_lifecycle_sent_as_the_server_understands(fake, nous):
    from datetime import UTC, datetime

    from ferret.records import TimeRange
    nous.search("bitcoin", 5, Filters(lifecycle="active", time_range=TimeRange(start=datetime(2026, 1, 1, tzinfo=UTC))))
    _, body = fake.requests[-1]
    assert body["lifecycle"] == "ACTIVE"
    assert body["time_range"]["start"].startswith("2026-01-01") and body["time_range"]["end"].startswith("9999")
