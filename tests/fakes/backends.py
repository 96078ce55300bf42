"""Test doubles for backends: scripted answers, failures and delays."""

from __future__ import annotations

import threading
import time
from typing import Any

from ferret.errors import BackendUnavailable
from ferret.records import Filters, Hit


class ScriptedBackend:
    """Answers from a dict query -> hits; records every call."""

    name = "scripted"

    def __init__(self, answers: dict[str, list[Hit]] | None = None, default: list[Hit] | None = None,
                 delay: dict[str, float] | None = None, fail: set[str] | None = None,
                 classification: dict[str, Any] | None = None) -> None:
        self.answers = answers or {}
        self.default = default or []
        self.delay = delay or {}
        self.fail = fail or set()
        self.classification = classification
        self.answers_without_subtype: dict[str, list[Hit]] = {}  # what a search without a subtype filter finds
        self.calls: list[tuple[str, int, Filters, float | None]] = []
        self._lock = threading.Lock()

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        with self._lock:
            self.calls.append((query, limit, filters, timeout))
        if query in self.delay:
            time.sleep(self.delay[query])
        if query in self.fail or "*" in self.fail:
            raise BackendUnavailable(self.name, f"cannot search {query!r}")
        if filters.subtype is None and query in self.answers_without_subtype:
            return list(self.answers_without_subtype[query])[:limit]
        return list(self.answers.get(query, self.default))[:limit]

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        return self.classification

    def close(self) -> None:
        return None
