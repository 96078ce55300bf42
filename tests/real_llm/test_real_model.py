"""The LLM stages against the real local model (marked ``real_llm``). Each test first needs the model to have
answered (an agent step taken on a reply, a rating parsed): a dead or absent server fails every one of them.
Then, whatever the model writes, a run ends with an outcome and never past its deadline."""

from __future__ import annotations

import time

import pytest

from ferret.contract import parse_request
from ferret.records import Hit, Memory
from ferret.settings import AgentSettings, RerankSettings, Settings
from ferret.tracing import NoopTracer
from ferret.worker.agent.job import agent_chat, run_agent
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.llm.chat import ChatClient
from ferret.worker.llm.local_model import MODEL_ALIAS
from ferret.worker.llm.reranker import LLMScorer
from ferret.worker.pipeline.budget import Budget
from ferret.worker.pipeline.orchestrator import run_pipeline
from tests.timing import scaled

# A busy machine generates more slowly: deadlines and call timeouts are the idle machine's, stretched by its
# slowdown now (tests.timing); the runs' own bounds are checked against those, and pytest's limit is above them.
pytestmark = [pytest.mark.real_llm, pytest.mark.timeout(1800)]


def _settings(url: str, call_timeout: float) -> Settings:
    return Settings(agent=AgentSettings(enabled=True, base_url=url, model=MODEL_ALIAS, timeout_seconds=call_timeout),
                    rerank=RerankSettings(enabled=True, base_url=url, model=MODEL_ALIAS, timeout_seconds=call_timeout))


def _agent(url: str, memories: list[Memory], query: str, deadline: float, call_timeout: float):
    settings = _settings(url, call_timeout)
    backend = InMemoryBackend(memories)
    request = parse_request({"query": query, "options": {"agent": True}}, settings.limits)
    budget = Budget.of_seconds(deadline)
    started = time.monotonic()
    fast = run_pipeline(query, backend, settings.pipeline, budget=budget)
    chat = agent_chat(settings.agent)
    try:
        answer = run_agent(settings, chat, request, backend, fast, budget, NoopTracer(), True)
    finally:
        chat.close()
    return answer, time.monotonic() - started


def test_a_full_agent_run_takes_steps_on_the_models_replies_within_its_deadline(real_model, sample_memories):
    deadline = min(scaled(240), 1500)  # under pytest's limit
    answer, seconds = _agent(real_model, sample_memories, "Compare my BTC thesis with my ETH thesis", deadline,
                             min(scaled(90), 600))  # agent.timeout_seconds allows up to 600
    stats = answer.stats
    assert stats["llm_answers"] >= 1 and stats["steps"] >= 1, stats  # the model replied and a step was taken
    assert stats["outcome"] in ("ok", "clarification", "deadline", "fallback"), stats
    assert stats["outcome"] != "fallback" or stats.get("reason")
    assert seconds <= deadline + scaled(1)
    assert answer.hits  # the agent's or, at the least, the fast path's


def test_a_rerank_of_ten_hits_parses_the_models_ratings_within_its_timeout(real_model, sample_memories):
    timeout = min(scaled(60), 600)
    settings = _settings(real_model, timeout)
    scorer = LLMScorer(settings.rerank, ChatClient(settings.rerank))
    hits = [Hit.of(m, 0.5) for m in sample_memories[:10]]
    started = time.monotonic()
    try:
        scores = scorer.score("What is my BTC thesis?", hits, timeout)
    finally:
        scorer.close()
    assert time.monotonic() - started <= timeout + scaled(1)
    assert scores and set(scores) <= set(range(10)) and all(0 <= s <= 10 for s in scores.values())


def test_the_deadline_cuts_a_generation_under_way(real_model, sample_memories):
    """A 60 s call in a 4 s job: the model is reached, and the job's deadline, not the call's timeout or a
    failure, ends the run (``deadline``), or the model was quick enough to finish (``ok``/``clarification``)."""
    answer, seconds = _agent(real_model, sample_memories, "Compare my BTC thesis with my ETH thesis", 4, 60)
    stats = answer.stats
    assert stats["llm_calls"] >= 1 and stats["outcome"] in ("deadline", "ok", "clarification"), stats
    assert stats["outcome"] == "deadline" or stats["llm_answers"] >= 1, stats
    assert seconds <= 4 + scaled(1)
