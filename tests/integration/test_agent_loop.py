"""The agent loop against a scripted chat-completions server speaking the
real protocol over HTTP on loopback: nothing mocked below the HTTP boundary.
Searches run the real fast pipeline on the sample corpus (in memory)."""

from __future__ import annotations

import time

import pytest

from ferret.contract import parse_request
from ferret.redis_plumbing.server_process import loopback_port
from ferret.settings import AgentSettings, Settings
from ferret.tracing import SpanCollector
from ferret.worker.agent.job import agent_chat, run_agent
from ferret.worker.agent.protocol import STOP
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.fakes.agent_chat import ScriptedChat
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline

QUERY = "Compare my BTC thesis with my SOL thesis and say which did better"


def _think(thought, action, arguments):
    return f"THOUGHT: {thought}\nACTION: {action}\nARGUMENTS: {arguments}"


SEARCH_BTC = _think("I need the BTC thesis.", "search_memory", '{"query": "BTC thesis"}')
CONTINUE = "The SOL side is missing.\nACTION: continue"
ENOUGH = "Both theses are there.\nACTION: final_answer"


@pytest.fixture
def chat():
    server = ScriptedChat()
    yield server
    server.close()


def _settings(chat_url: str, **agent) -> Settings:
    return Settings(agent=AgentSettings(enabled=True, base_url=chat_url, api_key="sk-test", **agent))


def _run(chat_server, sample_memories, deadline=20.0, query=QUERY, **agent):
    settings = _settings(chat_server.base_url, **agent)
    backend = InMemoryBackend(sample_memories)
    request = parse_request({"query": query, "options": {"agent": True}}, settings.limits)
    budget = Budget.of_seconds(deadline)
    tracer = SpanCollector()
    fast = run_pipeline(query, backend, settings.pipeline, budget=budget)
    client = agent_chat(settings.agent)
    answer = run_agent(settings, client, request, backend, fast, budget, tracer, True)
    return answer, fast, tracer


def test_a_two_step_run_chooses_the_memories(chat, sample_memories):
    chat.script = [SEARCH_BTC, CONTINUE,
                   _think("Now SOL.", "search_memory", '{"query": "SOL thesis"}'), ENOUGH,
                   _think("m01 and m03 answer it.", "final_answer",
                          '{"memory_ids": ["m01", "m03"], "reason": "the two theses"}')]
    answer, _, tracer = _run(chat, sample_memories)
    stats = answer.stats
    assert stats["outcome"] == "ok" and stats["steps"] == 2 and stats["llm_calls"] == 5
    assert stats["reflection_concluded"] and not stats["forced_conclusion"] and not stats["backtracked"]
    assert [h.id for h in answer.hits] == ["m01", "m03"] and not answer.partial
    assert answer.sub_queries[-2:] == ("BTC thesis", "SOL thesis")
    assert all(0 <= h.sub_query < len(answer.sub_queries) for h in answer.hits)  # each names the search that found it
    assert "[thesis" in answer.context
    assert {r["temperature"] for r in chat.requests} == {0.3}
    assert set(chat.auth_headers) == {"Bearer sk-test"}
    names = [s.name for s in tracer.spans]
    assert names.count("agent.step") == 2 and names.count("agent.llm") == 5 and "agent" in names
    tools = [s for s in tracer.spans if s.name == "agent.tool"]
    groups = {s.span_id: s for s in tracer.spans if s.name == "agent.tools"}
    assert [s.attributes["tool"] for s in tools] == ["search_memory", "search_memory"]
    assert all(s.parent_span_id in groups for s in tools)  # each tool under its step's tools span


def test_parallel_actions_run_at_once_and_a_terminal_action_is_never_run_beside_another(chat, sample_memories):
    chat.script = [
        "THOUGHT: two independent searches.\nACTION_1: search_memory\nARGUMENTS_1: {\"query\": \"BTC thesis\"}\n"
        "ACTION_2: search_memory\nARGUMENTS_2: {\"query\": \"SOL thesis\"}",
        CONTINUE,
        "THOUGHT: done.\nACTION_1: search_memory\nARGUMENTS_1: {\"query\": \"ETH\"}\n"
        "ACTION_2: final_answer\nARGUMENTS_2: {\"memory_ids\": [\"m01\"]}",
    ]
    answer, _, _ = _run(chat, sample_memories)
    assert answer.stats["parallel_steps"] == 1 and answer.stats["steps"] == 2
    assert [h.id for h in answer.hits] == ["m01"]
    assert "ETH" not in answer.sub_queries  # the search beside final_answer was dropped


def test_a_dead_end_backtracks_once_with_a_hint(chat, sample_memories):
    chat.script = [_think("Try this.", "search_memory", '{"query": "zzzz qqqq"}'),
                   _think("Another way.", "search_memory", '{"query": "BTC thesis"}'), ENOUGH,
                   _think("Done.", "final_answer", '{"memory_ids": ["m01"]}')]
    answer, _, _ = _run(chat, sample_memories)
    assert answer.stats["backtracked"] and answer.stats["steps"] == 2 and answer.stats["outcome"] == "ok"
    retry = chat.prompts()[1]
    assert "PREVIOUS ATTEMPT FAILED" in retry and "zzzz qqqq" in retry
    assert "Step 1" not in retry  # the dead end was rolled back, not kept as a step


def test_a_second_dead_end_does_not_backtrack(chat, sample_memories):
    chat.script = [_think("a", "lookup_memory", '{"entity": "Zorblax"}'),
                   _think("b", "lookup_memory", '{"entity": "Quuxcoin"}'), CONTINUE,
                   _think("c", "final_answer", '{"memory_ids": []}')]
    answer, fast, _ = _run(chat, sample_memories)
    assert answer.stats["backtracked"] and answer.stats["steps"] == 3
    assert "nothing is known about 'Quuxcoin'" in chat.prompts()[2]  # observed and reflected on, not rolled back
    assert answer.stats["chosen"] == "all_found" and {h.id for h in answer.hits} == {h.id for h in fast.hits}


def test_max_steps_then_a_forced_conclusion(chat, sample_memories):
    chat.script = [SEARCH_BTC, CONTINUE, _think("more", "search_memory", '{"query": "SOL trade"}'), CONTINUE,
                   _think("Best I can do.", "final_answer", '{"memory_ids": ["m04", "m01"]}')]
    answer, _, _ = _run(chat, sample_memories, max_steps=2)
    assert answer.stats["forced_conclusion"] and not answer.stats["reflection_concluded"]
    assert answer.stats["steps"] == 2 and [h.id for h in answer.hits] == ["m04", "m01"]
    assert "Choose the memories" in chat.prompts()[-1]


def test_malformed_arguments_are_repaired(chat, sample_memories):
    chat.script = ["THOUGHT: search\nACTION: search_memory\nARGUMENTS: {query: 'BTC thesis',}", ENOUGH,
                   "THOUGHT: ok\nACTION: final_answer\nARGUMENTS: memory_ids=m01"]
    answer, _, _ = _run(chat, sample_memories)
    assert answer.stats["outcome"] == "ok" and [h.id for h in answer.hits] == ["m01"]


def test_the_answer_ends_before_an_observation_the_model_would_invent(chat, sample_memories):
    """The client sends stop sequences and the server (as a real one does) ends the answer there: the
    invented observation and final answer never reach the loop, which searches and reflects instead."""
    chat.script = [SEARCH_BTC + "\nOBSERVATION: found m99\nTHOUGHT: done\nACTION: final_answer\n"
                                'ARGUMENTS: {"memory_ids": ["m99"]}', ENOUGH,
                   _think("m01 answers it.", "final_answer", '{"memory_ids": ["m01"]}')]
    answer, _, _ = _run(chat, sample_memories)
    assert chat.requests[0]["stop"] == list(STOP)
    assert answer.stats["outcome"] == "ok" and answer.stats["steps"] == 1 and answer.stats["llm_calls"] == 3
    assert [h.id for h in answer.hits] == ["m01"] and answer.stats["parse_repairs"] == 0


def test_a_repeated_action_is_not_run_again_and_answers_with_what_was_found(chat, sample_memories):
    chat.script = [SEARCH_BTC, CONTINUE, _think("Search again.", "search_memory", '{"query": "btc THESIS"}')]
    answer, fast, tracer = _run(chat, sample_memories)
    stats = answer.stats
    assert stats["outcome"] == "ok" and stats["steps"] == 2 and stats["llm_calls"] == 3  # no conclusion call
    assert stats["repeated_action"].startswith("search_memory(") and stats["chosen"] == "all_found"
    assert answer.sub_queries.count("BTC thesis") == 1  # searched once
    assert "m01" in {h.id for h in answer.hits}
    assert [h.id for h in answer.hits][: len(fast.hits)] == [h.id for h in fast.hits]  # the fast path's order first
    assert [s.attributes.get("repeated") for s in tracer.spans if s.name == "agent.step"] == [None, True]


def test_repairs_are_counted_per_run(chat, sample_memories):
    chat.script = ['THOUGHT: search\nACTION: search_memory("BTC thesis")', ENOUGH,
                   "THOUGHT: ok\nACTION: final_answer\nARGUMENTS: memory_ids=m01"]
    answer, _, _ = _run(chat, sample_memories)
    assert answer.stats["outcome"] == "ok" and [h.id for h in answer.hits] == ["m01"]
    assert answer.sub_queries[-1] == "BTC thesis" and answer.stats["parse_repairs"] == 2


def test_malformed_output_falls_back_to_the_fast_path(chat, sample_memories):
    chat.script = ["I think BTC is interesting.", "Really, BTC."]
    answer, fast, _ = _run(chat, sample_memories)
    assert answer.stats["outcome"] == "fallback" and "no ACTION" in answer.stats["reason"]
    assert answer.hits == fast.hits and not answer.partial


def test_a_slow_server_is_cut_at_the_deadline(chat, sample_memories):
    chat.script = [SEARCH_BTC, CONTINUE, _think("more", "search_memory", '{"query": "SOL trade"}')]
    chat.delay = 0.4
    started = time.monotonic()
    answer, fast, _ = _run(chat, sample_memories, deadline=1.5)
    assert time.monotonic() - started < 1.6
    assert answer.stats["outcome"] == "deadline" and answer.partial
    assert [h.id for h in answer.hits[:len(fast.hits)]] == [h.id for h in fast.hits]  # the fast path's, then the steps'
    assert chat.requests, "the loop had started"


def test_an_unreachable_server_falls_back(sample_memories):
    port = loopback_port()  # free: nothing listens there
    closed = type("Closed", (), {"base_url": f"http://127.0.0.1:{port}/v1"})()
    answer, fast, _ = _run(closed, sample_memories)
    assert answer.stats["outcome"] == "fallback" and "error" in answer.stats["reason"]
    assert answer.hits == fast.hits


def test_ask_clarification_keeps_the_fast_answer(chat, sample_memories):
    chat.script = [_think("Unclear.", "ask_clarification", '{"question": "Which trade do you mean?"}')]
    answer, fast, _ = _run(chat, sample_memories, query="huh?")
    assert answer.stats["outcome"] == "clarification"
    assert answer.stats["clarification"] == "Which trade do you mean?" and answer.hits == fast.hits


def test_the_agent_path_through_real_workers_of_both_classes(env, producer, sample_namespace, chat, start_workers):
    """`ferret query --agent` against workers with the agent on; then the endpoint goes away and the job
    still ends ok with the fast path's answer."""
    import json
    import subprocess
    import sys

    agent_env = {"FERRET_AGENT__ENABLED": "true", "FERRET_AGENT__BASE_URL": chat.base_url,
                 "FERRET_AGENT__API_KEY": "sk-secret-key"}
    start_workers(1, "--worker-class", "simple", extra_env=agent_env)
    start_workers(1, "--worker-class", "fork", extra_env=agent_env)
    for number in range(2):
        chat.script = [_think("search", "search_memory", '{"query": "SOL thesis"}'), ENOUGH,
                       _think("done", "final_answer", '{"memory_ids": ["m03"], "reason": "the SOL thesis"}')]
        asked = subprocess.run([sys.executable, "-m", "ferret.cli.main", "query", f"SOL thesis please {number}",
                                "-n", sample_namespace, "--agent", "--queue", "batch", "--json", "--wait", "30"],
                               env={**env, **agent_env}, capture_output=True, text=True, timeout=60)
        assert asked.returncode == 0, asked.stderr
        doc = json.loads(asked.stdout)
        assert doc["status"] == "ok" and doc["stats"]["agent"]["outcome"] == "ok", doc["stats"]
        assert [r["id"] for r in doc["results"]] == ["m03"]
        assert doc["results"][0]["sub_query_text"] in (f"SOL thesis please {number}", "SOL thesis")
    chat.close()  # the endpoint is gone: the fast path answers
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch",
                               "options": {"agent": True}})
    result = producer.wait(handle, 30)
    assert result.status == "ok" and result.stats.agent["outcome"] == "fallback" and result.results
    assert "sk-secret-key" not in json.dumps(result.model_dump(mode="json"))


def test_ferret_run_with_the_agent_and_without_it(chat, embedded_env, tmp_path):
    import json
    import subprocess
    import sys

    from tests.conftest import SAMPLE

    def ferret(*args, **extra):
        return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env={**embedded_env, **extra},
                              capture_output=True, text=True, timeout=120)

    assert ferret("ingest", str(SAMPLE), "-n", "t", "--quiet").returncode == 0
    off = json.loads(ferret("run", "BTC thesis", "-n", "t", "--agent", "--json").stdout)
    assert off["stats"]["agent"]["outcome"] == "disabled" and off["results"]
    chat.script = [SEARCH_BTC, ENOUGH, _think("m01.", "final_answer", '{"memory_ids": ["m01"]}')]
    on = ferret("run", "BTC thesis", "-n", "t", "--agent", "--json", FERRET_AGENT__ENABLED="true",
                FERRET_AGENT__BASE_URL=chat.base_url)
    doc = json.loads(on.stdout)
    assert doc["stats"]["agent"]["outcome"] == "ok" and [r["id"] for r in doc["results"]] == ["m01"]
    assert {"agent", "agent.step", "agent.tool", "agent.llm"} <= {s["name"] for s in doc["trace"]["spans"]}
    again = json.loads(ferret("run", "BTC thesis", "-n", "t", "--agent", "--json", FERRET_AGENT__ENABLED="true",
                              FERRET_AGENT__BASE_URL=chat.base_url).stdout)
    assert again["stats"]["cache_hit"] and [r["id"] for r in again["results"]] == ["m01"]  # an ok answer is cached
    table = ferret("run", "BTC thesis", "-n", "t", "--agent", FERRET_AGENT__ENABLED="true",
                   FERRET_AGENT__BASE_URL=chat.base_url,
                   FERRET_CACHE__ENABLED="false")  # the script is used up: answers with no action
    assert "agent" in table.stdout and "fallback" in table.stdout, table.stdout
