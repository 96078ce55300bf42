"""LLM re-ranking through real workers against a local chat completions server."""

from __future__ import annotations

import json

import pytest

from ferret.worker.fakes.chat_server import FakeChat
from tests.conftest import free_port
from tests.integration.test_metrics import wait_for_metrics
from tests.timing import scaled


@pytest.fixture
def chat():
    server = FakeChat(favourite={"funding"})
    yield server
    server.close()


def _rerank_env(chat: FakeChat) -> dict[str, str]:
    return {"FERRET_RERANK__ENABLED": "true", "FERRET_RERANK__BASE_URL": chat.base_url,
            "FERRET_RERANK__TIMEOUT_SECONDS": "1"}


def _ask(producer, namespace, query, **options):
    return producer.wait(producer.enqueue({"query": query, "namespace": namespace, "options": options}), 20)


def test_asked_rerank_reorders_flags_and_counts(chat, producer, sample_namespace, start_workers):
    port = free_port()
    start_workers(1, "--metrics-port", str(port), extra_env=_rerank_env(chat))
    plain = _ask(producer, sample_namespace, "BTC")
    assert plain.stats.rerank == "off" and not chat.requests
    reranked = _ask(producer, sample_namespace, "BTC", rerank=True)
    assert reranked.status == "ok" and reranked.stats.rerank == "ok"
    assert len(chat.requests) == 1
    assert reranked.results[0].rerank_score == 10.0 and "funding" in reranked.results[0].preview.lower()
    assert plain.results[0].id != reranked.results[0].id, "the sample corpus's top BTC hit is not about funding"
    assert {r.id for r in reranked.results} == {r.id for r in plain.results}
    spans = {s["name"]: s for s in producer.trace(reranked.job_id)["spans"]}
    assert spans["rerank"]["attributes"]["outcome"] == "ok"
    metrics = wait_for_metrics(port)
    assert metrics[("ferret_rerank_total", (("outcome", "ok"),))] == 1


@pytest.mark.parametrize("mode", ["malformed", "error500", "slow"])
def test_failures_fall_back_are_counted_and_not_cached(mode, chat, producer, sample_namespace, start_workers):
    chat.mode, chat.delay = mode, 5.0
    port = free_port()
    start_workers(1, "--metrics-port", str(port), extra_env=_rerank_env(chat))
    first = _ask(producer, sample_namespace, "BTC", rerank=True)
    reason = {"malformed": "malformed", "error500": "error", "slow": "timeout"}[mode]
    assert first.status == "ok" and first.stats.rerank == reason
    assert all(r.rerank_score is None for r in first.results)
    assert [r.score for r in first.results] == sorted((r.score for r in first.results), reverse=True)
    second = _ask(producer, sample_namespace, "BTC", rerank=True)
    assert second.stats.cache_hit is False, "a fallen-back re-rank is not cached"
    assert wait_for_metrics(port)[("ferret_rerank_total", (("outcome", reason),))] == 2
    after = _ask(producer, sample_namespace, "what signals are firing right now?")
    assert after.status == "ok", "the worker keeps serving"


def test_a_slow_llm_never_makes_a_job_miss_its_deadline(chat, producer, sample_namespace, start_workers):
    deadline = scaled(1.5)
    chat.mode, chat.delay = "slow", deadline + 4
    start_workers(1, extra_env={**_rerank_env(chat), "FERRET_RERANK__TIMEOUT_SECONDS": "60"})
    handle = producer.enqueue({"query": "BTC", "namespace": sample_namespace, "deadline_seconds": deadline,
                               "options": {"rerank": True}})
    result = producer.wait(handle, 20 + deadline)
    assert result.stats.rerank == "timeout" and result.results
    assert result.status == "ok", "the call stops short of the deadline, leaving time to finish"
    late = result.timestamps.finished_at - result.timestamps.deadline_at
    assert late < scaled(1.0), f"finished {late:.2f}s after the deadline"


def test_query_command_asks_for_the_rerank(chat, env, sample_namespace, start_workers):
    from tests.integration.test_cli import _ferret

    start_workers(1, extra_env=_rerank_env(chat))
    out = _ferret(["query", "BTC", "-n", sample_namespace, "--rerank", "--explicit", "--json"], env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["stats"]["rerank"] == "ok" and doc["results"][0]["rerank_score"] == 10.0
    table = _ferret(["query", "BTC", "-n", sample_namespace, "--rerank"], env)
    assert "re-rank: ok" in table.stdout
