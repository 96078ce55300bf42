"""The semantic retriever on the local backend: embeddings computed when memories are written, kept
with them in Redis, followed by each worker through the change log; real redis-server, real worker
processes, and a fake OpenAI-compatible embeddings server over HTTP on loopback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ferret import keys
from ferret.errors import BackendProtocolError
from ferret.records import NO_FILTERS, Filters, Memory
from ferret.settings import SemanticSettings
from ferret.worker.backends.local import LocalBackends, MemoryStore
from ferret.worker.fakes.embeddings_server import FakeEmbeddings
from ferret.worker.semantic.embedders import EndpointEmbedder

QUESTION = "When did I sell my car?"  # no word of it is in the memory that answers it
MEMORIES = [Memory(id="auto", type="event", content_body="Got rid of the old automobile at the market in May"),
            Memory(id="pup", type="event", content_body="Adopted a puppy from the shelter"),
            Memory(id="trip", type="plan", content_body="Trip to Paris next spring")]


@pytest.fixture
def embeddings():
    server = FakeEmbeddings()
    yield server
    server.close()


def _embedder(server):
    return EndpointEmbedder(SemanticSettings(enabled=True, provider="endpoint", base_url=server.base_url))


def _nearest(backends, namespace, query=QUESTION, filters=NO_FILTERS):
    return [h.id for h in backends.for_namespace(namespace).similar(query, 3, filters) if h.score > 0.1]


def test_embeddings_are_written_with_the_memories_and_followed_write_by_write(redis_client, embeddings, tmp_path):
    embedder = _embedder(embeddings)
    store = MemoryStore(redis_client, "sem", embedder=embedder)
    store.upsert(MEMORIES)
    assert redis_client.hlen(keys.embeddings("sem")) == 3
    backends = LocalBackends(redis_client, index_root=tmp_path / "idx", embedder=embedder)
    try:
        assert _nearest(backends, "sem") == ["auto"]
        assert backends.for_namespace("sem").search("sell car", 5, NO_FILTERS) == [], "no word in common"
        store.upsert([Memory(id="sedan", type="event", content_body="Bought a sedan")])  # one more write
        assert set(_nearest(backends, "sem")) == {"auto", "sedan"}
        assert _nearest(backends, "sem", filters=Filters(type="plan")) == []
        store.delete(["auto"])
        assert _nearest(backends, "sem") == ["sedan"]
        MemoryStore(redis_client, "sem").upsert([Memory(id="sedan", content_body="Bought a sedan")])
        assert _nearest(backends, "sem") == [], "rewritten without an embedding: it has none"
        store.clear()
        assert redis_client.exists(keys.embeddings("sem")) == 0 and _nearest(backends, "sem") == []
    finally:
        backends.close()


def test_an_unreadable_embedding_is_left_out_not_fatal(redis_client, embeddings, tmp_path):
    embedder = _embedder(embeddings)
    MemoryStore(redis_client, "sem", embedder=embedder).upsert(MEMORIES)
    redis_client.hset(keys.embeddings("sem"), "pup", b"\x00garbage")  # hostile: 8 bytes, not 256 floats
    redis_client.hset(keys.embeddings("sem"), "odd", b"\x00\x00\x80\x3f")  # a well-formed 1-float vector
    backends = LocalBackends(redis_client, index_root=tmp_path / "idx", embedder=embedder)
    try:
        assert _nearest(backends, "sem") == ["auto"]
        assert "pup" not in [h.id for h in backends.for_namespace("sem").similar("puppy", 3, NO_FILTERS)]
    finally:
        backends.close()


def test_an_embedding_model_of_another_width_is_a_protocol_error_naming_the_endpoint(redis_client, embeddings,
                                                                                     tmp_path):
    MemoryStore(redis_client, "sem", embedder=_embedder(embeddings)).upsert(MEMORIES)  # 256 dimensions
    narrower = FakeEmbeddings(dimensions=64)
    backends = LocalBackends(redis_client, index_root=tmp_path / "idx", embedder=_embedder(narrower))
    try:
        with pytest.raises(BackendProtocolError) as raised:
            backends.for_namespace("sem").similar(QUESTION, 3, NO_FILTERS)
        message = str(raised.value)
        assert narrower.base_url in message and "64-dimension" in message and "256" in message
        assert "matmul" not in message
    finally:
        backends.close()
        narrower.close()


def test_an_endpoint_whose_vectors_change_width_is_a_protocol_error(embeddings):
    embedder = _embedder(embeddings)
    embedder.embed(["first"])
    embeddings.dimensions = 128
    with pytest.raises(BackendProtocolError, match=r"128-dimension vectors after 256-dimension ones"):
        embedder.embed(["second"])


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_ingest_embeds_and_a_worker_finds_by_meaning(env, redis_client, embeddings, start_workers, tmp_path,
                                                      worker_class):
    semantic = {"FERRET_SEMANTIC__ENABLED": "true", "FERRET_SEMANTIC__PROVIDER": "endpoint",
                "FERRET_SEMANTIC__BASE_URL": embeddings.base_url}
    corpus = tmp_path / "memories.jsonl"
    corpus.write_text("\n".join(m.model_dump_json() for m in MEMORIES) + "\n")
    ingest = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(corpus), "-n", "sem"],
                            env={**env, **semantic}, capture_output=True, text=True, timeout=60)
    assert ingest.returncode == 0, ingest.stderr
    assert redis_client.hlen(keys.embeddings("sem")) == 3
    start_workers(1, "--worker-class", worker_class, extra_env=semantic)
    asked = subprocess.run([sys.executable, "-m", "ferret.cli.main", "query", QUESTION, "-n", "sem", "--json",
                            "--wait", "30"], env={**env, **semantic}, capture_output=True, text=True, timeout=60)
    assert asked.returncode == 0, asked.stderr
    doc = json.loads(asked.stdout)
    assert doc["status"] == "ok" and [r["id"] for r in doc["results"]][:1] == ["auto"]
    fusion = doc["stats"]["fusion"]
    assert fusion["ran"] == ["lexical", "semantic"] and fusion["contributed"]["semantic"] >= 1
