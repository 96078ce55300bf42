import pytest

from worker.pipeline.classify import Classification, QueryType
from worker.pipeline.complexity import Route, evaluate_complexity


def _classification(qtype=QueryType.FACTUAL, entities=(), keywords=0, confidence=0.7):
    return Classification(disqualifiers=(), query_type=qtype, confidence=confidence, entity=None,
                          attribute=None, entities=tuple(entities), intents=(), keyword_matches=keywords)


def test_seed_worked_example_routes_to_complex():
    # COMPARATIVE, 2 entities, 3 sub-questions, 4 keywords, confidence 0.7 -> 0.684
    result = evaluate_complexity(_classification(QueryType.COMPARATIVE, ["X", "Y"], 4, 0.7), 3)
    assert result.score == pytest.approx(0.6833, abs=1e-3)
    assert result.route is Route.COMPLEX


def test_single_strong_signal_stays_simple():
    result = evaluate_complexity(_classification(QueryType.ANALYTICAL), 1)
    assert result.score == pytest.approx(0.25)
    assert result.route is Route.SIMPLE


def test_converging_signals_are_moderate():
    # COMPARATIVE (0.25) + 2 entities (0.10) + 2 keywords (0.10) = 0.45
    result = evaluate_complexity(_classification(QueryType.COMPARATIVE, ["A", "B"], 2), 1)
    assert result.score == pytest.approx(0.45)
    assert result.route is Route.MODERATE


def test_low_confidence_ramp():
    assert evaluate_complexity(_classification(confidence=0.2), 1).factors["low_confidence"] == pytest.approx(1.0)
    assert evaluate_complexity(_classification(confidence=0.6), 1).factors["low_confidence"] == pytest.approx(0.2)
