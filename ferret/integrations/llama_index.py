"""A LlamaIndex retriever over Ferret (``pip install 'ferret-memory[llama-index]'``).

``FerretRetriever(namespace="alice").retrieve("when is the dinner?")``
returns llama-index-core ``NodeWithScore``s (a ``TextNode`` of the memory's
preview, Ferret's score, its labels in ``metadata``); ``aretrieve`` too.
``similarity_top_k`` is the most nodes to return (the request's
``options.max_results``). ``request`` takes any other request field
(``filters``, ``options``, ``history``, ``deadline_seconds``); an argument
the retriever does not know is refused (``TypeError``)."""

from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import ferret
from ferret.integrations import AsyncClients, answered, metadata, with_limit


class FerretRetriever(BaseRetriever):
    def __init__(self, namespace: str, client: Any = None, timeout: float = 30.0,
                 request: dict[str, Any] | None = None, async_client: Any = None,
                 similarity_top_k: int | None = None, **kwargs: Any) -> None:
        """``client``: a ``ferret.connect()`` client, ``async_client`` a ``ferret.connect_async()``
        one (for ``aretrieve``); each made on first use when not given. ``kwargs``: LlamaIndex's own
        (``callback_manager``, ``verbose``, ...)."""
        super().__init__(**kwargs)
        if similarity_top_k is not None and not (isinstance(similarity_top_k, int) and 1 <= similarity_top_k <= 1000):
            raise ValueError("similarity_top_k: a whole number from 1 to 1000")
        self.namespace = namespace
        self.timeout = timeout
        self.similarity_top_k = similarity_top_k
        self.request = with_limit(dict(request or {}), similarity_top_k)
        self._ferret = client
        self._async = AsyncClients(async_client)

    def _client(self) -> Any:
        if self._ferret is None:
            self._ferret = ferret.connect()
        return self._ferret

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self._client().query(query_bundle.query_str, self.namespace, timeout=self.timeout, **self.request)
        return _nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self._async().query(query_bundle.query_str, self.namespace, timeout=self.timeout,
                                           **self.request)
        return _nodes(result)


def _nodes(result: Any) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=item.id, text=item.preview, metadata=metadata(item, result)),
                          score=item.score) for item in answered(result)]
