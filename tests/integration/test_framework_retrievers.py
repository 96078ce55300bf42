"""Ferret as a LangChain and a LlamaIndex retriever, with the real libraries,
sync and async, against a real redis-server and a real worker."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore

import ferret
from ferret.integrations import RetrievalFailed
from ferret.integrations.langchain import FerretRetriever as LangChainRetriever
from ferret.integrations.llama_index import FerretRetriever as LlamaIndexRetriever

NOTES = [{"id": "anna", "type": "event", "content_body": "Dinner party for Anna on Friday at 8"},
         {"id": "bread", "type": "procedure", "content_body": "Sourdough: feed the starter the night before"}]


@pytest.fixture
def client(env, monkeypatch, start_workers):
    for name, value in env.items():
        if name.startswith("FERRET_"):
            monkeypatch.setenv(name, value)
    start_workers(1)
    with ferret.connect() as connected:
        connected.remember("kitchen", NOTES)
        yield connected


async def _without_threads(call):
    """The async call's answer, checked to have run on the loop: no thread started for it
    (the libraries' default async path runs the sync one in the loop's executor, whose thread lives on until
    the loop closes). Threads are compared by identity, not counted: an earlier test's thread may end meanwhile."""
    before = set(threading.enumerate())
    answer = await call
    assert set(threading.enumerate()) - before == set()
    return answer


def test_langchain_invoke_and_ainvoke(client):
    retriever = LangChainRetriever(namespace="kitchen", client=client)
    documents = retriever.invoke("when is the dinner party for Anna")
    assert documents and isinstance(documents[0], Document)
    assert documents[0].id == "anna" and "Dinner party for Anna" in documents[0].page_content
    assert documents[0].metadata["score"] > 0 and documents[0].metadata["status"] == "ok"
    again = asyncio.run(_without_threads(retriever.ainvoke("sourdough starter")))
    assert again[0].id == "bread"
    assert asyncio.run(retriever.ainvoke("dinner party"))[0].id == "anna"  # another loop: its own client
    own = LangChainRetriever(namespace="kitchen", request={"options": {"max_results": 1}})  # connects by itself
    assert [d.id for d in own.invoke("sourdough starter")] == ["bread"]


def test_llama_index_retrieve_and_aretrieve(client):
    retriever = LlamaIndexRetriever("kitchen", client=client)
    nodes = retriever.retrieve("when is the dinner party for Anna")
    assert nodes and isinstance(nodes[0], NodeWithScore)
    assert nodes[0].node.node_id == "anna" and "Dinner party" in nodes[0].node.get_content()
    assert nodes[0].score == nodes[0].node.metadata["score"] > 0
    again = asyncio.run(_without_threads(retriever.aretrieve("sourdough starter")))
    assert again[0].node.node_id == "bread"
    assert asyncio.run(retriever.aretrieve("dinner party"))[0].node.node_id == "anna"


def test_a_request_without_an_answer_raises(client):
    late = LangChainRetriever(namespace="kitchen", client=client, request={"deadline_seconds": 0.000001})
    with pytest.raises(RetrievalFailed, match="expired"):
        late.invoke("anything at all")


def test_llama_index_honours_similarity_top_k(client):
    client.remember("kitchen", [{"id": f"dough-{n}", "type": "procedure",
                                 "content_body": f"Sourdough dough, fold {n}: stretch and fold"} for n in range(5)])
    assert len(LlamaIndexRetriever("kitchen", client=client, similarity_top_k=2).retrieve("sourdough dough")) == 2
    assert len(LlamaIndexRetriever("kitchen", client=client, similarity_top_k=4).retrieve("sourdough dough")) == 4


def test_unknown_arguments_are_refused_not_ignored():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="top_k"):
        LangChainRetriever(namespace="kitchen", top_k=3)
    with pytest.raises(TypeError, match="k"):
        LlamaIndexRetriever("kitchen", k=3)
    with pytest.raises(ValueError, match="similarity_top_k"):
        LlamaIndexRetriever("kitchen", similarity_top_k=0)
