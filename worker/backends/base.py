"""The backend interface.

A backend answers ``search(query, limit, filters, timeout) -> list[Hit]``,
best first, with scores in [0, 1] that mean the same thing from one query to
the next (never max-normalised: the quality gate compares them with fixed
thresholds). ``classify`` may return a remote classification or None.
Failures are raised as ``BackendError`` subclasses.
"""

from __future__ import annotations

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
