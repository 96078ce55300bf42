import pytest

from ferret.errors import BackendUnavailable
from ferret.records import Filters, Hit, Memory
from ferret.settings import PipelineSettings
from ferret.tracing import SpanCollector
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline
from tests.fakes.backends import ScriptedBackend

SETTINGS = PipelineSettings()


def _hit(node_id, score, subtype=None):
    return Hit.of(Memory(id=node_id, content_title=f"title {node_id}", subtype=subtype), score)


def test_compound_query_on_sample_corpus_covers_both_parts(sample_memories):
    tracer = SpanCollector()
    result = run_pipeline("What's my BTC thesis and how did my last SOL trade go?",
                          InMemoryBackend(sample_memories), SETTINGS, tracer=tracer)
    stats = result.stats.plan
    assert stats.was_decomposed and len(stats.sub_queries) == 2
    ids = {h.id for h in result.hits}
    assert "m01" in ids, "the BTC thesis"
    assert "m04" in ids, "the last SOL trade"
    assert {h.sub_query for h in result.hits} == {0, 1}
    names = {s.name for s in tracer.spans}
    assert {"classify", "decompose", "complexity", "search", "search.sub_query", "merge", "replace", "format"} <= names
    assert set(result.stats.stage_ms) >= {"classify", "search", "merge", "format"}


def test_simple_query_is_one_search_no_decomposition():
    backend = ScriptedBackend(default=[_hit("a", 0.8), _hit("b", 0.6)])
    result = run_pipeline("BTC thesis", backend, SETTINGS)
    assert len(backend.calls) == 1 and not result.stats.plan.was_decomposed
    assert [h.id for h in result.hits] == ["a", "b"] and result.stats.search.retries == 0


def test_the_lexical_search_leaves_out_question_words():
    backend = ScriptedBackend(default=[_hit("a", 0.8)])
    run_pipeline("When did Caroline move to Sweden?", backend, SETTINGS)
    assert [c[0] for c in backend.calls] == ["Caroline move to Sweden"]


def test_weak_search_is_retried_once_without_subtype():
    backend = ScriptedBackend(answers={"BTC support level": [_hit("a", 0.1)]})  # weak with the subtype
    backend.answers_without_subtype = {"BTC support level": [_hit("b", 0.5)]}
    result = run_pipeline("What's BTC support level?", backend, SETTINGS,
                          filters=Filters(subtype="custom:thesis", lifecycle="ACTIVE"))
    assert [c[0] for c in backend.calls][:2] == ["BTC support level", "BTC support level"]
    assert backend.calls[1][2] == Filters(lifecycle="ACTIVE")
    assert result.stats.search.retries == 1
    assert result.hits[0].id == "b"


def test_disabled_is_a_single_search():
    backend = ScriptedBackend(default=[_hit("a", 0.1)])
    result = run_pipeline("What's BTC at? Did SOL close?", backend, SETTINGS.model_copy(update={"enabled": False}))
    assert len(backend.calls) == 1 and result.stats.search.retries == 0 and not result.stats.plan.was_decomposed


def test_failing_sub_query_gives_empty_list_not_failure():
    backend = ScriptedBackend(answers={"BTC at": [_hit("a", 0.7)]}, fail={"SOL close"})
    result = run_pipeline("What's BTC at? Did SOL close?", backend, SETTINGS)
    assert [h.id for h in result.hits] == ["a"]
    assert result.stats.search.sub_query_errors == 1


def test_all_searches_failing_and_the_fallback_too_raises_backend_error():
    tracer = SpanCollector()
    with pytest.raises(BackendUnavailable) as failed:
        run_pipeline("BTC", ScriptedBackend(fail={"*"}), SETTINGS, tracer=tracer)
    assert "fallback search failed too" in str(failed.value) and failed.value.fallback == "failed"
    assert [s.attributes["outcome"] for s in tracer.spans if s.name == "fallback"] == ["failed"]


def test_every_sub_query_failing_falls_back_to_one_plain_search():
    question = "What's BTC at? Did SOL close?"
    backend = ScriptedBackend(answers={question: [_hit("a", 0.7)]}, fail={"BTC at", "SOL close"})
    tracer = SpanCollector()
    result = run_pipeline(question, backend, SETTINGS, tracer=tracer)
    assert [h.id for h in result.hits] == ["a"] and result.partial
    assert result.stats.answer.fallback == "ok" and "cannot search" in result.stats.answer.fallback_cause
    assert result.stats.search.sub_query_errors == 2 and backend.calls[-1][0] == question
    assert "fallback" in {s.name for s in tracer.spans} and "fallback" in result.stats.stage_ms


def test_unexpected_orchestration_failure_falls_back(monkeypatch):
    import ferret.worker.pipeline.orchestrator as orchestrator

    def broken(*args, **kwargs):
        raise KeyError("bug in merge")
    monkeypatch.setattr(orchestrator, "merge_and_select", broken)  # the merge stage, as the orchestrator calls it
    result = run_pipeline("BTC thesis", ScriptedBackend(default=[_hit("a", 0.8)]), SETTINGS)
    assert [h.id for h in result.hits] == ["a"] and result.partial
    assert result.stats.answer.fallback == "ok" and result.stats.answer.fallback_cause.startswith("KeyError")


def test_no_fallback_when_no_time_is_left():
    backend = ScriptedBackend(default=[_hit("a", 0.7)], delay={"What is A1": 1.0, "What is B2": 1.0})
    with pytest.raises(BackendUnavailable) as failed:
        run_pipeline("What is A1? What is B2?", backend, SETTINGS, budget=Budget.of_seconds(0.2))
    assert failed.value.fallback == "timeout"
    assert [c[0] for c in backend.calls] == ["What is A1", "What is B2"]


def test_sub_queries_run_in_parallel():
    """Each sub-query's search waits until all three are running: run one after another, the first would
    wait alone until its barrier broke. Nothing is timed (a busy machine only makes them later)."""
    import threading

    parts = ("What is A1", "What is B2", "What is C3")
    together = threading.Barrier(len(parts), timeout=60)
    met: list[str] = []

    class Together(ScriptedBackend):
        def search(self, query, limit, filters, timeout=None):
            if query in parts:
                together.wait()
                met.append(query)
            return super().search(query, limit, filters, timeout)

    backend = Together(default=[_hit("a", 0.7)])
    settings = SETTINGS.model_copy(update={"timeout_seconds": 120})  # no budget cuts the wait
    result = run_pipeline("What is A1? What is B2? What is C3?", backend, settings)
    assert sorted(met) == sorted(parts) and not together.broken
    assert not result.partial


def test_deadline_cuts_slow_sub_query_and_returns_partial():
    backend = ScriptedBackend(answers={"What is A1": [_hit("a", 0.7)], "What is B2": [_hit("b", 0.6)]},
                              delay={"What is B2": 1.0})
    result = run_pipeline("What is A1? What is B2?", backend, SETTINGS, budget=Budget.of_seconds(0.2))
    assert result.partial
    assert [h.id for h in result.hits] == ["a"]
    assert result.stats.search.sub_query_timeouts == 1


def test_expired_budget_skips_search():
    backend = ScriptedBackend(default=[_hit("a", 0.7)])
    result = run_pipeline("BTC", backend, SETTINGS, budget=Budget.of_seconds(-1))
    assert result.partial and result.hits == () and backend.calls == []
    assert "search" in result.stats.skipped_stages


def test_moderate_route_searches_deeper():
    backend = ScriptedBackend(default=[_hit("a", 0.7)])
    result = run_pipeline("BTC and SOL analysis", backend, SETTINGS)
    assert result.stats.plan.route == "MODERATE"
    assert {c[1] for c in backend.calls} == {round(SETTINGS.search_limit_per_query * 1.5)}


def test_remote_classifier_enriches_and_its_failure_does_not_fail():
    backend = ScriptedBackend(default=[_hit("a", 0.7)], classification=None)
    result = run_pipeline("BTC", backend, SETTINGS, use_remote_classifier=True)
    assert result.stats.plan.remote_classifier == "failed" and result.hits
    remote = ScriptedBackend(default=[_hit("a", 0.7)], classification={"disqualifier_category": "D1"})
    assert "D1" in run_pipeline("BTC", remote, SETTINGS, use_remote_classifier=True).stats.plan.disqualifiers


def test_query_text_not_recorded_when_disallowed():
    tracer = SpanCollector()
    run_pipeline("secret BTC plan", ScriptedBackend(default=[_hit("a", 0.7)]), SETTINGS,
                 tracer=tracer, record_query=False)
    assert "secret" not in str([s.to_dict() for s in tracer.spans])


def test_max_results_option():
    backend = ScriptedBackend(default=[_hit(f"n{i}", 0.9 - i * 0.01) for i in range(20)])
    assert len(run_pipeline("BTC", backend, SETTINGS, max_results=3).hits) == 3


@pytest.mark.parametrize(("message", "reason"), [("ok", "trivial"), ("Thanks!", "trivial"),
                                                 ("[2026-11-23 14:05]", "empty")])
def test_a_message_with_nothing_to_search_is_not_searched(message, reason):
    backend, tracer = ScriptedBackend(default=[_hit("a", 0.8)]), SpanCollector()
    result = run_pipeline(message, backend, SETTINGS, tracer=tracer)
    assert backend.calls == [] and result.hits == () and not result.partial
    assert (result.stats.plan.route, result.stats.prepared.trivial) == ("TRIVIAL", reason)
    assert [s.name for s in tracer.spans] == ["trivial"]


def test_a_leading_timestamp_is_not_searched():
    backend = ScriptedBackend(default=[_hit("a", 0.8)])
    result = run_pipeline("[14:05:22] funding squeeze playbook", backend, SETTINGS)
    assert [call[0] for call in backend.calls] == ["funding squeeze playbook"]
    assert result.stats.prepared.timestamp_stripped is True


def test_each_factor_and_the_override_are_in_the_stats_and_the_trace():
    tracer = SpanCollector()
    result = run_pipeline("how many documents are in the database?", ScriptedBackend(default=[_hit("a", 0.8)]),
                          SETTINGS, tracer=tracer)
    stats = result.stats.plan
    assert set(stats.complexity_factors) == {"query_type", "entity_count", "subquestion_count", "keyword_matches",
                                             "low_confidence"}
    assert (stats.complexity_score, stats.complexity_override, stats.route) == (0.75, "meta", "COMPLEX")
    span = next(s for s in tracer.spans if s.name == "complexity")
    assert span.attributes["override"] == "meta" and span.attributes["score"] == 0.75
    assert span.attributes["formula_score"] < 0.35
    assert {k for k in span.attributes if k.startswith("factor.")} == {f"factor.{k}" for k in stats.complexity_factors}


def test_the_seeds_worked_example_routes_to_the_agent_path():
    result = run_pipeline("Compare les avantages et inconvenients du processus X par rapport a Y",
                          ScriptedBackend(default=[_hit("a", 0.8)]), SETTINGS)
    factors = result.stats.plan.complexity_factors
    assert factors["query_type"] == 1.0 and factors["entity_count"] == 0.5 and factors["keyword_matches"] == 1.0
    assert factors["subquestion_count"] == pytest.approx(2 / 3, abs=1e-3)
    plan = result.stats.plan
    assert plan.complexity_score == pytest.approx(0.684, abs=0.002) and plan.route == "COMPLEX"


def test_a_reference_is_searched_as_what_it_points_at():
    from ferret.contract import Turn

    backend, tracer = ScriptedBackend(default=[_hit("a", 0.8)]), SpanCollector()
    history = (Turn(content="Compare my BTC and SOL trades"), Turn(content="Tell me about BTC"))
    result = run_pipeline("and the other one?", backend, SETTINGS, tracer=tracer, history=history)
    assert backend.calls[0][0] == "and SOL"  # the rewritten query, as the lexical retriever searches it
    assert (result.stats.prepared.references_resolved, result.stats.prepared.rewritten_query) == (1, "and SOL?")
    span = next(s for s in tracer.spans if s.name == "rewrite")
    assert span.attributes["resolved"] == 1 and span.attributes["turns"] == 2
    hidden = run_pipeline("and the other one?", ScriptedBackend(default=[]), SETTINGS, history=history,
                          record_query=False)
    assert hidden.stats.prepared.references_resolved == 1 and hidden.stats.prepared.rewritten_query is None
