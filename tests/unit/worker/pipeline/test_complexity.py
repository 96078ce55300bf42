import pytest

from ferret.worker.pipeline.classify import Classification, QueryType
from ferret.worker.pipeline.complexity import Route, evaluate_complexity, is_ambiguous


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


@pytest.mark.parametrize("query", ["how many documents are in the database?", "combien de documents ?",
                                   "list all docs", "wie viele Dokumente habe ich?", "¿cuántos recuerdos hay?"])
def test_a_question_about_the_store_is_raised_to_075(query):
    result = evaluate_complexity(_classification(QueryType.FACTUAL, [], 0, 0.9), 1, query)
    assert result.formula_score < 0.35 and result.score == 0.75
    assert (result.route, result.override) == (Route.COMPLEX, "meta")


@pytest.mark.parametrize("query", ["huh?", "which one?? the long??", "either the ETH long or the SOL short",
                                   "soit le long soit le short, lequel a marché ?",
                                   "entweder der Long oder der Short, was lief besser?"])
def test_an_ambiguous_message_is_raised_to_065_and_routed_ambiguous(query):
    result = evaluate_complexity(_classification(QueryType.FACTUAL, [], 0, 0.9), 1, query)
    assert result.score == 0.65 and (result.route, result.override) == (Route.AMBIGUOUS, "ambiguous")


@pytest.mark.parametrize("query", ["how many BTC trades did I lose last month?",
                                   "What lessons did I learn about stops after the Fed held rates?"])
def test_ordinary_questions_get_no_override(query):
    result = evaluate_complexity(_classification(QueryType.FACTUAL, [], 0, 0.9), 1, query)
    assert result.override is None and result.score == result.formula_score and result.route is Route.SIMPLE


def test_an_override_never_lowers_a_score():
    strong = _classification(QueryType.COMPARATIVE, ["A", "B", "C", "D"], 4, 0.2)
    result = evaluate_complexity(strong, 4, "huh?")
    assert result.score == result.formula_score == 1.0 and result.route is Route.AMBIGUOUS


def test_the_rewritten_query_is_routed_a_resolved_reference_is_not_ambiguous():
    """The route is the searched query's: "how did it go" after a turn about SOL is "how did SOL go", which
    is short because the conversation says the rest, not for want of meaning."""
    from ferret.contract import Turn
    from ferret.records import Memory
    from ferret.settings import PipelineSettings
    from ferret.worker.backends.memory import InMemoryBackend
    from ferret.worker.pipeline.orchestrator import run_pipeline

    backend = InMemoryBackend([Memory(id="s", content_title="SOL trade", content_body="Closed the SOL long")])
    followed = run_pipeline("how did it go", backend, PipelineSettings(),
                            history=[Turn(role="user", content="I traded SOL yesterday")])
    assert followed.stats.prepared.rewritten_query == "how did SOL go"
    assert followed.stats.plan.route != "AMBIGUOUS" and followed.stats.plan.complexity_override is None
    alone = run_pipeline("how did it go", backend, PipelineSettings())  # nothing to resolve it from
    assert alone.stats.plan.route == "AMBIGUOUS"
    assert is_ambiguous("how did SOL go??", resolved=True)  # several question marks still are
