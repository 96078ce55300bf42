"""What Ferret asks a Nous server, against the real server's answers.

Every test runs three times: against a **recording** of the real
``nous-server`` (``recordings/nous_server.json``, made by
``ops/nous/record_twin.py``), against Ferret's **fake** Nous (so the fake
cannot drift from the real server), and against a **live** server when
``FERRET_TEST_NOUS_URL`` names one (a throwaway server: the tests write the
22 sample memories into it). With ``FERRET_TEST_NOUS_RECORD`` set to a file as
well, the live run's exchanges are written there: that is how the recording
is made.

The world: the sample memories posted without ids (the server names them),
m09 and m11 set DORMANT, two clusters (sol, btc), five ``relates_to`` edges,
one of them strengthened to 0.8.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import fakeredis
import httpx
import pytest

from ferret.errors import BackendProtocolError
from ferret.records import Filters, Hit, Memory, TimeRange
from ferret.settings import FusionSettings, NousSettings, PipelineSettings, Settings
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.nous import NousBackend, _search_body
from ferret.worker.backends.writers import NousWriter
from ferret.worker.fakes.nous_server import FakeNous
from ferret.worker.pipeline.orchestrator import run_pipeline
from tests.contract.nous_recording import RecordingProxy, ReplayServer

RECORDING = Path(__file__).parent / "recordings" / "nous_server.json"
SAMPLE = Path(__file__).parents[2] / "ferret" / "data" / "sample_memories.jsonl"
DORMANT = ("m09", "m11")
CLUSTERS = {"sol": ("m03", "m04", "m08", "m19", "m20"), "btc": ("m01", "m07", "m16", "m17")}
EDGES = (("m01", "m16"), ("m16", "m17"), ("m03", "m04"), ("m04", "m06"), ("m07", "m09"))
STRENGTHENED = (("m01", "m16"), 0.3)  # that edge: 0.5 + 0.3


def _sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def _as_stored() -> dict[str, Memory]:
    """The sample as the server stores it: DORMANT set, clusters by name."""
    stored = {}
    for row in _sample():
        clusters = tuple(name for name, members in CLUSTERS.items() if row["id"] in members)
        lifecycle = "DORMANT" if row["id"] in DORMANT else "ACTIVE"
        stored[row["id"]] = Memory.model_validate({**row, "state_lifecycle": lifecycle, "cluster_ids": clusters})
    return stored


@dataclass
class World:
    kind: str
    url: str
    ids: dict[str, str]  # sample id -> the server's node id
    clusters: dict[str, str]  # cluster name -> the server's id
    edges: dict[tuple[str, str], str]
    client: NousBackend
    raw: httpx.Client

    def sample_id(self, node_id: str) -> str:
        return {v: k for k, v in self.ids.items()}.get(node_id, node_id)


def _load(raw: httpx.Client) -> tuple[dict[str, str], dict[str, str], dict[tuple[str, str], str]]:
    """Put the world on the server through its own API, as an operator would."""
    ids = {}
    for row in _sample():
        body = {k: row[k] for k in ("type", "subtype", "content_title", "content_body", "temporal_event_time")
                if row.get(k)}
        answer = raw.post("nodes", json=body)
        assert answer.status_code == 201, answer.text
        ids[row["id"]] = answer.json()["id"]
    for key in DORMANT:
        assert raw.patch(f"nodes/{ids[key]}", json={"state_lifecycle": "DORMANT"}).status_code == 200
    clusters = {}
    for name, members in CLUSTERS.items():
        made = raw.post("clusters", json={"name": name})
        assert made.status_code == 201, made.text
        clusters[name] = made.json()["id"]
        added = raw.post(f"clusters/{clusters[name]}/members", json={"node_ids": [ids[m] for m in members]})
        assert added.status_code == 200, added.text
    edges = {}
    for source, target in EDGES:
        made = raw.post("edges", json={"source_id": ids[source], "target_id": ids[target], "type": "relates_to"})
        assert made.status_code == 201, made.text
        edges[(source, target)] = made.json()["id"]
    return ids, clusters, edges


@pytest.fixture(scope="module", params=["recorded", "fake", "live"])
def world(request) -> Iterator[World]:
    server: Any
    if request.param == "recorded":
        if not RECORDING.exists():
            pytest.fail(f"{RECORDING} is missing: record it with ops/nous/record_twin.py")
        server = ReplayServer(RECORDING)
        url = server.base_url
    elif request.param == "fake":
        server = FakeNous([])
        url = server.base_url
    else:
        live = os.environ.get("FERRET_TEST_NOUS_URL")
        if not live:
            pytest.skip("no live Nous server: set FERRET_TEST_NOUS_URL to a throwaway one (http://host:port/v1)")
        server = RecordingProxy(live) if os.environ.get("FERRET_TEST_NOUS_RECORD") else None
        url = server.base_url if server else live
    raw = httpx.Client(base_url=url.rstrip("/") + "/", timeout=30.0)
    client = NousBackend(NousSettings(base_url=url, timeout_seconds=30.0))
    try:
        ids, clusters, edges = _load(raw)
        (source, target), amount = STRENGTHENED
        client.strengthen_edge(edges[(source, target)], amount)
        yield World(request.param, url, ids, clusters, edges, client, raw)
    finally:
        client.close()
        raw.close()
        if isinstance(server, RecordingProxy):
            server.save(Path(os.environ["FERRET_TEST_NOUS_RECORD"]), os.environ.get("FERRET_TEST_NOUS_SERVER", live))
        if isinstance(server, ReplayServer):
            assert not server.unrecorded, f"requests not in the recording: {server.unrecorded}"
        if server is not None:
            server.close()


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# (name, query, filters by sample names: clusters by name)
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("type", "SOL", {"type": "event"}),
    ("subtype", "SOL", {"subtype": "custom:signal"}),
    ("lifecycle", "funding", {"lifecycle": "dormant"}),
    ("cluster", "SOL", {"cluster_ids": ["sol"]}),
    ("two clusters", "stop", {"cluster_ids": ["sol", "btc"]}),
    ("event range", "SOL", {"time_range": {"start": "2026-02-05T00:00:00Z", "end": "2026-02-28T00:00:00Z",
                                           "type": "event"}}),
    ("any range, past", "BTC", {"time_range": {"start": "2026-01-01T00:00:00Z", "end": "2026-02-09T00:00:00Z"}}),
    ("from", "SOL", {"time_range": {"start": "2026-02-05T00:00:00Z", "type": "event"}}),
    ("until", "SOL", {"time_range": {"end": "2026-02-05T00:00:00Z", "type": "event"}}),
    ("type + lifecycle", "funding", {"type": "concept", "lifecycle": "DORMANT"}),
    ("cluster + subtype", "BTC", {"cluster_ids": ["btc"], "subtype": "custom:trade_entry"}),
    ("cluster + range", "SOL", {"cluster_ids": ["sol"], "time_range": {"start": "2026-02-05T00:00:00Z",
                                                                       "type": "event"}}),
    ("lifecycle + range", "breakout", {"lifecycle": "dormant", "time_range": {"end": "2026-02-01T00:00:00Z",
                                                                              "type": "event"}}),
    ("cluster + type + lifecycle", "SOL", {"cluster_ids": ["sol"], "type": "event", "lifecycle": "ACTIVE"}),
]


def _filters(spec: dict[str, Any], clusters: dict[str, str] | None) -> Filters:
    spec = dict(spec)
    if "cluster_ids" in spec and clusters is not None:
        spec["cluster_ids"] = [clusters[name] for name in spec["cluster_ids"]]
    return Filters.model_validate(spec)


@pytest.mark.parametrize(("name", "query", "spec"), CASES, ids=[case[0] for case in CASES])
def test_each_filter_returns_what_the_server_found(world, name, query, spec):
    filters = _filters(spec, world.clusters)
    answer = world.raw.post("search", json=_search_body(query, 10, filters))
    assert answer.status_code == 200, answer.text
    found_by_server = {item["id"] for item in answer.json()["data"]}
    hits = world.client.search(query, 10, filters)
    assert found_by_server, f"{name}: the server found nothing, the case tests nothing"
    assert {h.id for h in hits} == found_by_server, name
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # and what it found is what the filter means, on the memories as stored
    meant = _filters(spec, None)
    stored = _as_stored()
    assert all(matches(stored[world.sample_id(h.id)], meant) for h in hits), name


def test_a_one_sided_range_is_closed_before_it_is_sent(world):
    """The server ignores a range with one end; Ferret sends the open end as the earliest or latest time."""
    open_range = {"query": "SOL", "limit": 10, "time_range": {"start": "2026-02-05T00:00:00Z", "type": "event"}}
    ignored = world.raw.post("search", json=open_range).json()["data"]
    assert any(_when(item["temporal_event_time"]) < _when("2026-02-05T00:00:00Z") for item in ignored)
    hits = world.client.search("SOL", 10, Filters(time_range=TimeRange(start=_when("2026-02-05T00:00:00Z"),
                                                                       type="event")))
    assert hits and all(_when(h.memory.temporal_event_time or "") >= _when("2026-02-05T00:00:00Z") for h in hits)


def test_a_hit_shows_lifecycle_as_decay_sees_it_and_no_clusters(world):
    """Why Ferret does not re-check lifecycle and clusters on a hit."""
    dormant = world.ids["m09"]
    data = world.raw.post("search", json={"query": "funding", "limit": 10, "lifecycle": "DORMANT"}).json()["data"]
    hit = next(item for item in data if item["id"] == dormant)
    assert hit["state_lifecycle"] == "ACTIVE"
    assert not any("cluster" in field for item in data for field in item)
    assert world.client.node(dormant).state_lifecycle == "DORMANT"


def test_a_node_is_the_object_itself_and_a_missing_one_is_none(world):
    node = world.client.node(world.ids["m16"])
    assert node.id == world.ids["m16"] and node.content_title == "Opened BTC long at 61k"
    assert node.subtype == "custom:trade_entry" and node.temporal_event_time.startswith("2026-02-08T11:00")
    assert world.client.node("n_nosuchnode00") is None
    missing = world.raw.get("nodes/n_nosuchnode00")
    assert missing.status_code == 404 and missing.json() == {"error": "not found"}


def test_edges_come_both_ways_with_their_type_and_strength(world):
    edges = world.client.edges(world.ids["m16"])
    ends = {(world.sample_id(e["source_id"]), world.sample_id(e["target_id"])): e for e in edges}
    assert set(ends) == {("m01", "m16"), ("m16", "m17")}
    assert all(e["type"] == "relates_to" for e in edges)
    assert ends[("m01", "m16")]["strength"] == pytest.approx(0.8)
    assert ends[("m16", "m17")]["strength"] == pytest.approx(0.5)
    assert world.client.edges("n_nosuchnode00") == []


def test_the_graph_retriever_reads_linked_nodes(world):
    seed = Hit.of(world.client.node(world.ids["m16"]), 0.5)
    linked = world.client.linked([seed], 5, Filters())
    assert [(world.sample_id(h.id), round(h.score, 3)) for h in linked] == [("m01", 0.4), ("m17", 0.25)]
    assert [world.sample_id(h.id) for h in world.client.linked([seed], 5, Filters(subtype="custom:thesis"))] \
        == ["m01"]


def test_the_pipeline_fuses_the_servers_graph_without_errors(world):
    weights = {kind: (0.6, 0.4) for kind in ("UNKNOWN", "FACTUAL", "ANALYTICAL", "PROCEDURAL")}
    settings = PipelineSettings(fusion=FusionSettings(weights=weights))
    result = run_pipeline("BTC long 61k", world.client, settings)
    ids = [world.sample_id(h.id) for h in result.hits]
    assert ids[0] == "m16"
    assert result.stats.plan.fusion["errors"] == {}
    assert result.stats.plan.fusion["contributed"]["graph"] >= 1
    assert {"m01", "m17"} & set(ids)


def test_never_more_than_33_and_why(world):
    """Past 33 the server answers an unscored substring match; Ferret never asks for it."""
    fallback = world.raw.post("search", json={"query": "SOL", "limit": 34}).json()
    assert "score" not in fallback["data"][0] and "metrics" not in fallback
    hits = world.client.search("SOL", 100, Filters())
    assert hits and all(h.score > 0 for h in hits)


def test_classify_and_errors(world):
    assert isinstance(world.client.classify("what is my BTC thesis?")["query_type"], str)
    with pytest.raises(BackendProtocolError, match="query string is required"):
        world.client.search("", 5, Filters())
    with pytest.raises(BackendProtocolError, match="not found"):
        world.client.strengthen_edge("e_nosuchedge00", 0.1)
    unknown = world.raw.get("no-such-route")
    assert unknown.status_code == 404 and unknown.headers["content-type"].startswith("text/plain")


def test_writes_through_ferret_follow_the_ids_the_server_gives(world):
    settings = Settings.model_validate({"backend": {"kind": "nous", "nous": {"base_url": world.url}}})
    writer = NousWriter(settings, fakeredis.FakeRedis(), "default")
    try:
        memory = Memory(id="w-volcano", type="event", content_title="Volcano ferries timetable",
                        content_body="ferries leave at nine")
        assert writer.upsert([memory]) == 1
        first = world.client.search("volcano ferries", 5, Filters())
        assert len(first) == 1 and first[0].id != "w-volcano" and first[0].id.startswith("n_")
        assert writer.upsert([memory.model_copy(update={"content_body": "ferries leave at ten"})]) == 1
        again = world.client.search("volcano ferries", 5, Filters())
        assert [h.id for h in again] == [first[0].id] and again[0].memory.content_body == "ferries leave at ten"
        assert writer.delete(["w-volcano"]) == 1
        assert world.client.search("volcano ferries", 5, Filters()) == []
        assert writer.delete(["w-volcano"]) == 0
    finally:
        writer.close()
