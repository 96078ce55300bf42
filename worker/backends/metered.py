"""A backend wrapper that notes every call's outcome and duration.

The notes go into the job's stats (a short list, one entry per call), from
which the worker process records backend metrics. Outcomes: ``ok``,
``timeout``, ``error``. A call still running when the job reads its notes
(abandoned at the deadline) when the job settles them is noted as a ``timeout`` of the time it had
run; should it end later, its late note is not added.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from ferret.errors import BackendError
from ferret.records import Filters, Hit, Memory
from ferret.worker.backends.base import Backend, GraphBackend, SemanticBackend, WideningBackend, retrievers_of, widens

T = TypeVar("T")


def outcome_of(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, BackendError) and "timed out" in str(exc) else "error"


class MeteredBackend:
    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.retrievers = retrievers_of(inner)
        self.widens = widens(inner)
        self._notes: list[tuple[str, str, float]] = []  # (operation, outcome, seconds)
        self._running: dict[int, tuple[str, float]] = {}  # call number -> (operation, started)
        self._count = 0
        self._closed = False
        self._lock = threading.Lock()

    def settle(self) -> list[tuple[str, str, float]]:
        """Every call's note, once the job is done with the backend: calls
        still running count as timeouts, and no note is added after this."""
        now = time.perf_counter()
        with self._lock:
            self._closed = True
            return [*self._notes, *((op, "timeout", now - started) for op, started in self._running.values())]

    def _start(self, operation: str) -> tuple[int, float]:
        started = time.perf_counter()
        with self._lock:
            self._count += 1
            self._running[self._count] = (operation, started)
            return self._count, started

    def _note(self, call: tuple[int, float], operation: str, outcome: str) -> None:
        number, started = call
        with self._lock:
            if self._running.pop(number, None) is not None and not self._closed:
                self._notes.append((operation, outcome, time.perf_counter() - started))

    def _metered(self, operation: str, call: Callable[[], T]) -> T:
        started = self._start(operation)
        try:
            answer = call()
        except Exception as exc:
            self._note(started, operation, outcome_of(exc))
            raise
        self._note(started, operation, "ok")
        return answer

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        return self._metered("search", lambda: self.inner.search(query, limit, filters, timeout=timeout))

    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        """The graph retriever (only called when ``retrievers`` has ``graph``)."""
        inner = cast(GraphBackend, self.inner)
        return self._metered("linked", lambda: list(inner.linked(seeds, limit, filters, timeout=timeout)))

    def similar(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        """The semantic retriever (only called when ``retrievers`` has ``semantic``)."""
        inner = cast(SemanticBackend, self.inner)
        return self._metered("similar", lambda: list(inner.similar(query, limit, filters, timeout=timeout)))

    def widened(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        """The word-family search (only called when ``widens``)."""
        inner = cast(WideningBackend, self.inner)
        return self._metered("widened", lambda: list(inner.widened(query, limit, filters, timeout=timeout)))

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        call = self._start("classify")
        try:
            answer = self.inner.classify(query, timeout=timeout)
        except Exception as exc:
            self._note(call, "classify", outcome_of(exc))
            raise
        self._note(call, "classify", "ok" if answer is not None else "error")
        return answer

    def successors(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories that supersede any of ``ids`` (a backend that keeps no such links: none)."""
        lookup = getattr(self.inner, "successors", None)
        if lookup is None or not ids:
            return {}
        return cast(dict[str, Memory], self._metered("successors", lambda: lookup(ids)))

    def close(self) -> None:
        self.inner.close()
