"""The re-rank stage inside the pipeline: when it runs, and what a failure leaves."""

import pytest

from ferret.errors import RerankFailed
from ferret.records import Hit, Memory
from ferret.settings import PipelineSettings, RerankSettings
from ferret.tracing import SpanCollector
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.rerank import Reranking
from tests.fakes.backends import ScriptedBackend

SETTINGS = PipelineSettings()
COMPLEX = "Compare and analyze the difference between BTC, ETH, SOL and DOGE trends and why"
SIMPLE = "BTC thesis"
ON = RerankSettings(enabled=True)


class FakeScorer:
    """Prefers the hit whose id is ``favourite``; or raises ``failure``."""

    def __init__(self, favourite="c", failure=None):
        self.favourite, self.failure = favourite, failure
        self.calls = []

    def score(self, query, candidates, timeout):
        self.calls.append((query, [h.id for h in candidates], timeout))
        if self.failure:
            raise RerankFailed(self.failure, "scripted")
        return {i: 10.0 if h.id == self.favourite else 0.0 for i, h in enumerate(candidates)}


def _backend():
    hits = [Hit.of(Memory(id=i, content_title=f"note {i}"), s) for i, s in (("a", 0.9), ("b", 0.8), ("c", 0.7))]
    return ScriptedBackend(default=hits)


def test_complex_route_is_reranked_unasked_when_switched_on():
    scorer = FakeScorer()
    tracer = SpanCollector()
    result = run_pipeline(COMPLEX, _backend(), SETTINGS, reranking=Reranking(ON, scorer), tracer=tracer)
    assert result.stats.plan.route == "COMPLEX" and result.stats.answer.rerank == "ok"
    assert result.hits[0].id == "c" and result.hits[0].rerank_score == 10.0
    assert result.hits[0].original_score == 0.7
    span = next(s for s in tracer.spans if s.name == "rerank")
    assert span.attributes["outcome"] == "ok" and "rerank" in result.stats.stage_ms
    assert len(scorer.calls) == 1 and scorer.calls[0][0] == COMPLEX


def test_simple_route_is_reranked_only_when_asked():
    scorer = FakeScorer()
    plain = run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(ON, scorer))
    assert plain.stats.answer.rerank == "off" and not scorer.calls and plain.hits[0].id == "a"
    asked = run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(ON, scorer), rerank=True)
    assert asked.stats.answer.rerank == "ok" and asked.hits[0].id == "c"


def test_complex_route_not_reranked_when_on_complex_route_is_off():
    scorer = FakeScorer()
    settings = ON.model_copy(update={"on_complex_route": False})
    result = run_pipeline(COMPLEX, _backend(), SETTINGS, reranking=Reranking(settings, scorer))
    assert result.stats.answer.rerank == "off" and not scorer.calls


def test_asked_but_switched_off_is_reported_not_an_error():
    result = run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(RerankSettings()), rerank=True)
    assert result.stats.answer.rerank == "disabled" and [h.id for h in result.hits] == ["a", "b", "c"]


@pytest.mark.parametrize("reason", ["timeout", "error", "malformed"])
def test_a_failed_rerank_keeps_the_original_order(reason):
    scorer = FakeScorer(failure=reason)
    result = run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(ON, scorer), rerank=True)
    assert result.stats.answer.rerank == reason and not result.partial
    assert [h.id for h in result.hits] == ["a", "b", "c"] and result.hits[0].rerank_score is None


def test_the_call_gets_at_most_the_time_left_and_top_k_candidates():
    scorer = FakeScorer()
    settings = ON.model_copy(update={"top_k": 2, "timeout_seconds": 30})
    run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(settings, scorer), rerank=True,
                 budget=Budget.of_seconds(1.0))
    _query, ids, timeout = scorer.calls[0]
    assert ids == ["a", "b"] and 0 < timeout <= 0.9, "the time left less the reserve"


def test_no_call_without_time_left():
    scorer = FakeScorer()
    settings = ON.model_copy(update={"min_seconds_left": 5})
    result = run_pipeline(SIMPLE, _backend(), SETTINGS, reranking=Reranking(settings, scorer), rerank=True,
                          budget=Budget.of_seconds(1.0))
    assert result.stats.answer.rerank == "deadline" and not scorer.calls and "rerank" in result.stats.skipped_stages
