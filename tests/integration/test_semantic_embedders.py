"""The endpoint embedder against a fake OpenAI-compatible embeddings server over real HTTP."""

import numpy as np
import pytest

from ferret.errors import BackendProtocolError, BackendUnavailable
from ferret.settings import SemanticSettings
from ferret.worker.fakes.embeddings_server import FakeEmbeddings
from ferret.worker.semantic.embedders import EndpointEmbedder, embedder_for, unpacked_model


@pytest.fixture
def server():
    fake = FakeEmbeddings()
    yield fake
    fake.close()


def _embedder(server, **changes):
    return EndpointEmbedder(SemanticSettings(enabled=True, provider="endpoint", base_url=server.base_url,
                                             model="all-minilm", **changes))


def test_unit_vectors_in_the_order_asked_and_alike_by_meaning(server):
    vectors = _embedder(server).embed(["sold my automobile", "when did I sell the car", "adopted a puppy"])
    assert vectors.shape == (3, 256) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > 0.4 > 0.05 > similarity[0, 2]
    assert server.requests[-1] == {"model": "all-minilm", "input": ["sold my automobile", "when did I sell the car",
                                                                      "adopted a puppy"]}


def test_the_api_key_is_sent_as_a_bearer_token(server):
    seen = []
    original = server._handle

    def spy(handler):
        seen.append(handler.headers.get("Authorization"))
        return original(handler)
    server._handle = spy
    _embedder(server, api_key="sk-embed").embed(["x"])
    assert seen == ["Bearer sk-embed"]


@pytest.mark.parametrize(("mode", "error"), [("error500", BackendUnavailable), ("wrong_shape", BackendProtocolError)])
def test_failures_are_backend_errors(server, mode, error):
    server.mode = mode
    with pytest.raises(error, match="embeddings"):
        _embedder(server).embed(["x"])


def test_a_slow_endpoint_is_cut_at_the_timeout(server):
    server.mode, server.delay = "slow", 2.0
    with pytest.raises(BackendUnavailable, match="timed out"):
        _embedder(server).embed(["x"], timeout=0.2)


def test_off_means_no_embedder():
    assert embedder_for(SemanticSettings()) is None


def test_a_missing_model_package_is_said_plainly(tmp_path, monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(BackendUnavailable, match=r"pip install 'ferret-memory\[semantic\]'"):
        unpacked_model(tmp_path)


def test_many_texts_go_in_calls_of_batch_size(server):
    vectors = _embedder(server, batch_size=2).embed(["car", "puppy", "paris", "doctor", "sold"])
    assert vectors.shape == (5, 256)
    assert [len(r["input"]) for r in server.requests] == [2, 2, 1]
    assert (vectors[0] @ _embedder(server).embed(["automobile"])[0]) > 0.9, "rows stay in order"
