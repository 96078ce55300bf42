"""The backend interface.

A backend answers ``search(query, limit, filters, timeout) -> list[Hit]``,
best first, with scores in [0, 1] that mean the same thing from one query to
the next (never max-normalised: the quality gate compares them with fixed
thresholds). ``classify`` may return a remote classification or None.
Failures are raised as ``BackendError`` subclasses.

A backend may also serve the fusion's other retrievers, and says which in
``retrievers`` (absent: lexical only): ``linked(seeds, ...)`` gives the
memories linked to the seeds (the graph retriever), ``similar(query, ...)``
the memories nearest the query's embedding (the semantic retriever).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ferret.records import Filters, Hit


@runtime_checkable
class Backend(Protocol):
    name: str

    def search(
        self, query: str, limit: int, filters: Filters, timeout: float | None = None
    ) -> list[Hit]: ...

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


def retrievers_of(backend: Any) -> tuple[str, ...]:
    """The retrievers ``backend`` serves: ``lexical`` always, ``graph`` and ``semantic`` when it says so."""
    return tuple(getattr(backend, "retrievers", ("lexical",)))


def widens(backend: Any) -> bool:
    """True when ``backend`` can search a query's word family (``widened``) for a search that found nothing."""
    return bool(getattr(backend, "widens", False))


class WideningBackend(Protocol):
    def widened(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]: ...


class GraphBackend(Protocol):
    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters,
               timeout: float | None = None) -> list[Hit]: ...


class SemanticBackend(Protocol):
    def similar(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]: ...
