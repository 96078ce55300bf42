"""The graph retriever on a Nous server: the seeds' edges, then the linked nodes, through the real client."""

from __future__ import annotations

import pytest

from ferret.records import Filters, Hit, Memory
from ferret.settings import FusionSettings, PipelineSettings
from ferret.worker.fakes.nous_server import FakeNous
from ferret.worker.pipeline.orchestrator import run_pipeline

MEMORIES = [Memory(id="thesis", content_title="BTC thesis: halving supply shock"),
            Memory(id="stop", content_title="placed the stop under the weekly low", type="event"),
            Memory(id="plan", content_title="weekly plan", type="plan"),
            Memory(id="far", content_title="ETH gas fees")]


@pytest.fixture
def fake():
    server = FakeNous(MEMORIES)
    server.add_edge("e1", "thesis", "stop", strength=0.8)
    server.add_edge("e2", "plan", "thesis", strength=0.4)  # the other direction counts too
    server.add_edge("e3", "thesis", "gone", strength=0.9)  # a node the server no longer has
    server.add_edge("e4", "far", "plan", strength=1.0)  # not linked to the seed
    yield server
    server.close()


def test_linked_memories_score_strength_times_the_seed(nous):
    seed = Hit.of(MEMORIES[0], 0.5)
    found = nous.linked([seed], 5, Filters())
    assert [(h.id, round(h.score, 3)) for h in found] == [("stop", 0.4), ("plan", 0.2)]
    assert [h.id for h in nous.linked([seed], 5, Filters(type="plan"))] == ["plan"]
    assert nous.node("gone") is None and nous.node("stop").id == "stop"


def test_the_pipeline_fuses_the_servers_graph(nous):
    settings = PipelineSettings(fusion=FusionSettings(weights={"UNKNOWN": (0.5, 0.5), "FACTUAL": (0.5, 0.5)}))
    result = run_pipeline("BTC thesis halving", nous, settings)
    ids = [h.id for h in result.hits]
    assert ids[0] == "thesis" and "stop" in ids
    assert result.stats.plan.fusion["contributed"]["graph"] >= 1
