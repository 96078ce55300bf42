"""A LlamaIndex retriever over Ferret (``pip install 'ferret[llama-index]'``).

``FerretRetriever(namespace="alice").retrieve("when is the dinner?")``
returns llama-index-core ``NodeWithScore``s (a ``TextNode`` of the memory's
preview, Ferret's score, its labels in ``metadata``); ``aretrieve`` too.
``request`` takes any other request field (``filters``, ``options``,
``history``, ``deadline_seconds``)."""

from __future__ import annotations

from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import ferret
from ferret.integrations import AsyncClients, answered, metadata


class FerretRetriever(BaseRetriever):
    def __init__(self, namespace: str, client: Any = None, timeout: float = 30.0,
                 request: dict[str, Any] | None = None, async_client: Any = None, **kwargs: Any) -> None:
        """``client``: a ``ferret.connect()`` client, ``async_client`` a ``ferret.connect_async()``
        one (for ``aretrieve``); each made on first use when not given."""
        super().__init__(**kwargs)
        self.namespace = namespace
        self.timeout = timeout
        self.request = dict(request or {})
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
