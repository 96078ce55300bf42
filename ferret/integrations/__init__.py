"""Ferret as the retriever of agent frameworks, each behind its own extra:
``ferret.integrations.langchain`` (``pip install 'ferret-memory[langchain]'``) and
``ferret.integrations.llama_index`` (``pip install 'ferret-memory[llama-index]'``).
Both ask through ``ferret.connect()`` (the queue: the workers do the work),
their async calls through ``ferret.connect_async()`` (one client per event
loop: redis.asyncio connections belong to the loop that opened them), and
turn each result item into the library's own document type."""

from __future__ import annotations

import asyncio
from typing import Any

from ferret.contract import ResultItem, RetrievalResult
from ferret.errors import FerretError


class RetrievalFailed(FerretError):
    """The request ended without an answer (``failed`` or ``expired``)."""


def answered(result: RetrievalResult) -> list[ResultItem]:
    """The result's items; ``RetrievalFailed`` when it has no answer (``partial`` answers count)."""
    if result.status not in ("ok", "partial"):
        raise RetrievalFailed(f"job {result.job_id} ended {result.status}: {result.error or 'no answer'}")
    return result.results


def metadata(item: ResultItem, result: RetrievalResult) -> dict[str, Any]:
    """What a framework document carries besides its text: Ferret's scores and the memory's labels."""
    return {"id": item.id, "title": item.title, "section": item.section, "subtype": item.subtype,
            "date": item.date, "score": item.score, "original_score": item.original_score,
            "rerank_score": item.rerank_score, "sub_query": item.sub_query_text, "job_id": result.job_id,
            "status": result.status}


def with_limit(request: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``request`` with ``options.max_results`` set to ``limit`` (the framework's k), when one is given."""
    if limit is None:
        return request
    options = request.get("options") or {}
    return {**request, "options": {**options, "max_results": limit}}


class AsyncClients:
    """An ``AsyncClient`` per event loop, made on first use in that loop (or the one given)."""

    def __init__(self, given: Any = None) -> None:
        self._given = given
        self._by_loop: dict[asyncio.AbstractEventLoop, Any] = {}

    def __call__(self) -> Any:
        if self._given is not None:
            return self._given
        import ferret

        loop = asyncio.get_running_loop()
        for old in [other for other in self._by_loop if other.is_closed()]:
            del self._by_loop[old]  # its connections died with it
        if loop not in self._by_loop:
            self._by_loop[loop] = ferret.connect_async()
        return self._by_loop[loop]
