"""A LangChain retriever over Ferret (``pip install 'ferret-memory[langchain]'``).

``FerretRetriever(namespace="alice").invoke("when is the dinner?")`` returns
langchain-core ``Document``s (the memory's preview as ``page_content``,
Ferret's scores and labels in ``metadata``); ``ainvoke`` too. ``k`` (in the
constructor, or per call: ``invoke(query, k=3)``) is the most documents to
return (the request's ``options.max_results``). ``request`` takes any other
request field (``filters``, ``options``, ``history``, ``deadline_seconds``).
An argument the retriever does not know is refused, not ignored."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

import ferret
from ferret.integrations import AsyncClients, answered, metadata, with_limit


class FerretRetriever(BaseRetriever):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    namespace: str
    k: int | None = Field(default=None, ge=1, le=1000)  # the most documents to return (None: the service's cap)
    timeout: float = 30.0
    request: dict[str, Any] = Field(default_factory=dict)
    client: Any = None  # a ``ferret.connect()`` client; made on first use when not given
    async_client: Any = None  # a ``ferret.connect_async()`` client for ``ainvoke``; likewise
    _own: Any = PrivateAttr(default=None)
    _async: Any = PrivateAttr(default=None)

    def _client(self) -> Any:
        if self.client is not None:
            return self.client
        if self._own is None:
            self._own = ferret.connect()
        return self._own

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None) -> list[Document]:
        result = self._client().query(query, self.namespace, timeout=self.timeout, **with_limit(self.request,
                                                                                                 k or self.k))
        return [Document(page_content=item.preview, metadata=metadata(item, result), id=item.id)
                for item in answered(result)]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None) -> list[Document]:
        if self._async is None:
            self._async = AsyncClients(self.async_client)
        result = await self._async().query(query, self.namespace, timeout=self.timeout,
                                           **with_limit(self.request, k or self.k))
        return [Document(page_content=item.preview, metadata=metadata(item, result), id=item.id)
                for item in answered(result)]
