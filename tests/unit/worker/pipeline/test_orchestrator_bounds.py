"""Every backend call is bounded by the time left, whatever the backend does
with its own timeout; ``timeout_seconds`` bounds the whole orchestration."""

from __future__ import annotations

import threading
import time

import pytest

from ferret.errors import BackendUnavailable
from ferret.records import Filters, Hit, Memory
from ferret.settings import PipelineSettings
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline

HANG_SECONDS = 3.0


class FirstCallFast:
    """Answers its first search at once and hangs on every later one,
    ignoring the timeout it is given (as a misbehaving backend would)."""

    name = "hangs-after-first"

    def __init__(self, first: list[Hit]) -> None:
        self.first = first
        self.calls = 0
        self.lock = threading.Lock()

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        with self.lock:
            self.calls += 1
            calls = self.calls
        if calls > 1:
            time.sleep(HANG_SECONDS)
        return self.first[:limit]

    def classify(self, query: str, timeout: float | None = None) -> None:
        time.sleep(HANG_SECONDS)

    def close(self) -> None:
        return None


def _hits(*scores: float) -> list[Hit]:
    return [Hit.of(Memory(id=f"m{i}", content_title=f"BTC note {i}"), s) for i, s in enumerate(scores)]


def _timed(query: str, backend, settings: PipelineSettings, budget: Budget | None = None):
    start = time.monotonic()
    result = run_pipeline(query, backend, settings, budget=budget)
    return result, time.monotonic() - start


def _timed_failure(query: str, backend, settings: PipelineSettings, budget: Budget | None = None):
    start = time.monotonic()
    with pytest.raises(BackendUnavailable, match="timed out") as failure:
        run_pipeline(query, backend, settings, budget=budget)
    return failure.value, time.monotonic() - start


def test_a_single_sub_query_that_hangs_is_cut_at_the_deadline():
    backend = FirstCallFast([])
    backend.calls = 1  # even the first search hangs: not one search answered
    _, took = _timed_failure("BTC thesis", backend, PipelineSettings(), Budget.of_seconds(0.3))
    assert took < HANG_SECONDS / 2


def test_a_hanging_quality_gate_retry_is_cut_at_the_deadline():
    backend = FirstCallFast(_hits(0.05))  # weak: the gate retries (with the entity), and the retry hangs
    result, took = _timed("BTC thesis", backend, PipelineSettings(), Budget.of_seconds(0.3))
    assert took < HANG_SECONDS / 2 and result.partial


def test_hanging_replacement_searches_are_cut_at_the_deadline():
    backend = FirstCallFast(_hits(0.9, 0.85, 0.8, 0.8, 0.75, 0.7, 0.7, 0.65, 0.6, 0.6, 0.55, 0.1, 0.1))
    settings = PipelineSettings(relevance_ratio=0.05, min_results=5, subject_boost=1.0,  # the weak hits stay weak
                                max_replacements=2)
    result, took = _timed("BTC thesis", backend, settings, Budget.of_seconds(0.3))
    assert backend.calls >= 2, "a replacement search was made"
    assert took < HANG_SECONDS / 2 and result.partial


def test_a_hanging_remote_classifier_is_cut_at_the_deadline():
    backend = FirstCallFast(_hits(0.9))
    start = time.monotonic()
    result = run_pipeline("BTC thesis", backend, PipelineSettings(), budget=Budget.of_seconds(0.3),
                          use_remote_classifier=True)
    assert time.monotonic() - start < HANG_SECONDS / 2 and result.partial


def test_timeout_seconds_bounds_the_whole_orchestration_not_each_call():
    backend = FirstCallFast(_hits(0.05))  # the first search answers, the retry hangs
    settings = PipelineSettings(timeout_seconds=0.3)
    result, took = _timed("BTC thesis", backend, settings)  # no deadline at all
    assert took < HANG_SECONDS / 2 and result.partial


def test_the_deadline_wins_when_shorter_than_timeout_seconds():
    backend = FirstCallFast([])
    backend.calls = 1
    _, took = _timed_failure("BTC thesis", backend, PipelineSettings(timeout_seconds=60), Budget.of_seconds(0.3))
    assert took < HANG_SECONDS / 2


class NeverAnswers:
    """A backend whose store is out of reach: every search waits (a client's reconnect) past any budget."""

    name = "out-of-reach"

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        time.sleep(HANG_SECONDS)
        return []

    def close(self) -> None:
        return None


def test_a_search_cut_by_the_retrieval_budget_is_not_blamed_on_the_jobs_deadline():
    """A job with ten minutes left whose searches did not answer within the retrieval stages' budget: the
    error names that budget and the time the job had left, not "the job's deadline"."""
    settings = PipelineSettings(timeout_seconds=0.2)
    failure, _ = _timed_failure("BTC thesis", NeverAnswers(), settings, budget=Budget.of_seconds(600))
    assert "job's deadline left" in str(failure) and "pipeline.timeout_seconds" in str(failure), str(failure)
    assert "timed out at the job's deadline" not in str(failure)


def test_a_search_cut_by_the_jobs_deadline_says_so():
    settings = PipelineSettings(timeout_seconds=30)
    failure, _ = _timed_failure("BTC thesis", NeverAnswers(), settings, budget=Budget.of_seconds(0.2))
    assert "the job's deadline" in str(failure) and "retrieval budget" not in str(failure), str(failure)
