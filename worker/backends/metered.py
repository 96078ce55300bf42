"""A backend wrapper that notes every call's outcome and duration.

The notes go into the job's stats (a short list, one entry per call), from
which the worker process records backend metrics. Outcomes: ``ok``,
``timeout``, ``error``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ferret.errors import BackendError
from worker.backends.base import Backend
from worker.pipeline.records import Filters, Hit


def outcome_of(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, BackendError) and "timed out" in str(exc) else "error"


class MeteredBackend:
    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[str, str, float]] = []  # (operation, outcome, seconds)
        self._lock = threading.Lock()

    def _note(self, operation: str, outcome: str, started: float) -> None:
        with self._lock:
            self.calls.append((operation, outcome, time.perf_counter() - started))

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        started = time.perf_counter()
        try:
            hits = self.inner.search(query, limit, filters, timeout=timeout)
        except Exception as exc:
            self._note("search", outcome_of(exc), started)
            raise
        self._note("search", "ok", started)
        return hits

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        started = time.perf_counter()
        answer = self.inner.classify(query, timeout=timeout)
        self._note("classify", "ok" if answer is not None else "error", started)
        return answer

    def close(self) -> None:
        self.inner.close()
