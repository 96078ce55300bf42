"""Ferret as the retriever of agent frameworks, each behind its own extra:
``ferret.integrations.langchain`` (``pip install 'ferret[langchain]'``) and
``ferret.integrations.llama_index`` (``pip install 'ferret[llama-index]'``).
Both ask through ``ferret.connect()`` (the queue: the workers do the work)
and turn each result item into the library's own document type."""

from __future__ import annotations

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
