"""Co-retrieval strengthening of a Nous server's edges, through the real client."""

from __future__ import annotations

import pytest

from ferret.errors import BackendError
from ferret.records import Memory
from ferret.worker.co_retrieval.nous_edges import strengthen_edges
from ferret.worker.fakes.nous_server import FakeNous


@pytest.fixture
def fake():
    server = FakeNous([Memory(id="a", content_title="a")])
    for edge_id, source, target in [("e-ab", "a", "b"), ("e-bc", "b", "c"), ("e-ax", "a", "x"),
                                    ("e-xy", "x", "y"), ("e/odd id", "c", "a")]:
        server.add_edge(edge_id, source, target)
    yield server
    server.close()


def test_only_edges_within_a_group_are_strengthened_once(fake, nous):
    count = strengthen_edges(nous, [["a", "b", "c"], ["x", "y"]], 0.03, timeout=1.0)
    assert count == 4
    assert sorted(fake.strengthened) == [("e-ab", 0.03), ("e-bc", 0.03), ("e-xy", 0.03), ("e/odd id", 0.03)]
    assert fake.edges["e-ax"]["strength"] == 0.5, "a and x came from different sub-queries"
    assert fake.edges["e-ab"]["strength"] == pytest.approx(0.53)


def test_lists_edges_in_both_directions(fake, nous):
    assert {e["id"] for e in nous.edges("a")} == {"e-ab", "e-ax", "e/odd id"}
    assert any(path.startswith("/v1/edges?node_id=a&direction=both") for path, _ in fake.requests)


def test_a_down_server_raises_a_backend_error(fake, nous):
    fake.mode = "error500"
    with pytest.raises(BackendError):
        strengthen_edges(nous, [["a", "b"]], 0.05, timeout=1.0)
