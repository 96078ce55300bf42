"""LangChain's own standard test suite for retrievers (langchain-tests' ``RetrieversIntegrationTests``) against
``FerretRetriever``, on a real redis-server and a real worker: ``k`` in the constructor and in ``invoke``,
documents from ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

import ferret
from ferret.integrations.langchain import FerretRetriever

NOTES = [{"id": f"bread-{n}", "type": "procedure", "content_body": f"Sourdough bread, step {n}: feed the starter "
                                                                   f"and fold the dough ({n})"} for n in range(8)]


class TestFerretRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def service(self, env, monkeypatch, start_workers):
        for name, value in env.items():
            if name.startswith("FERRET_"):
                monkeypatch.setenv(name, value)
        start_workers(1)
        with ferret.connect() as client:
            client.remember("standard", NOTES)

    @property
    def retriever_constructor(self) -> type[FerretRetriever]:
        return FerretRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"namespace": "standard"}

    @property
    def retriever_query_example(self) -> str:
        return "how do I feed the sourdough starter?"

