"""A hung chat endpoint trips its circuit: the workers, both classes, skip it
at once while it is open (shared through Redis: a worker that never saw a
failure skips it too), jobs and metrics say so, and the circuit closes again
when the endpoint answers."""

from __future__ import annotations

import signal
import time

import pytest

from ferret.breaker import CircuitOpen
from ferret.worker.fakes.chat_server import FakeChat
from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import free_port
from tests.integration.test_metrics import wait_for_metrics
from tests.timing import scaled

COOLDOWN = 8.0  # on an idle machine; stretched by the machine's slowdown when the test starts


@pytest.fixture
def chat():
    server = FakeChat(favourite={"funding"})
    server.mode, server.delay = "slow", 30.0  # hung: answers long after any timeout
    yield server
    server.close()


def _env(chat: FakeChat, cooldown: float = COOLDOWN) -> dict[str, str]:
    return {"FERRET_RERANK__ENABLED": "true", "FERRET_RERANK__BASE_URL": chat.base_url,
            "FERRET_RERANK__TIMEOUT_SECONDS": "1", "FERRET_BREAKER__FAILURES": "3",
            "FERRET_BREAKER__COOLDOWN_SECONDS": f"{cooldown:.1f}"}


def _ask(producer, namespace: str, number: int):
    handle = producer.enqueue({"query": f"BTC funding {number}", "namespace": namespace,
                               "options": {"rerank": True, "cache": False}})
    return producer.wait(handle, 30)


def test_a_hung_chat_endpoint_is_skipped_by_every_worker_until_it_answers(chat, producer, sample_namespace,
                                                                         start_workers, redis_client):
    endpoint = f"chat {chat.base_url.rstrip('/')}"
    cooldown = round(scaled(COOLDOWN), 1)  # long enough, on this machine now, to see the circuit open
    [first] = start_workers(1, "--worker-class", "simple", extra_env=_env(chat, cooldown))
    tripped = [_ask(producer, sample_namespace, n) for n in range(3)]
    assert [r.stats.rerank for r in tripped] == ["timeout"] * 3 and all(r.status == "ok" for r in tripped)
    opened_at = time.monotonic()
    skipped = _ask(producer, sample_namespace, 3)
    assert skipped.stats.rerank == "circuit_open" and skipped.stats.circuit_open == [endpoint]
    assert skipped.status == "ok" and skipped.results
    assert skipped.timestamps.finished_at - skipped.timestamps.started_at < 1.0  # no call: no timeout waited
    calls = len(chat.requests)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=30)
    port = free_port()
    start_workers(1, "--worker-class", "fork", "--metrics-port", str(port), extra_env=_env(chat, cooldown))
    shared = _ask(producer, sample_namespace, 4)  # a worker that never saw the endpoint fail
    assert time.monotonic() - opened_at < cooldown, "the test was too slow to see the circuit open"
    assert shared.stats.rerank == "circuit_open" and shared.stats.circuit_open == [endpoint]
    assert len(chat.requests) == calls
    metrics = wait_for_metrics(port)
    assert metrics[("ferret_endpoint_circuit_open", (("endpoint", endpoint),))] == 1
    assert metrics[("ferret_endpoint_skipped_jobs_total", (("endpoint", endpoint),))] == 1
    assert metrics[("ferret_rerank_total", (("outcome", "circuit_open"),))] == 1
    chat.mode = "ok"
    time.sleep(max(0.0, cooldown - (time.monotonic() - opened_at)) + 0.5)
    healed = _ask(producer, sample_namespace, 5)
    assert healed.stats.rerank == "ok" and healed.stats.circuit_open is None
    assert not list(redis_client.scan_iter("ferret:breaker:*"))  # closed, probation over: nothing kept
    assert wait_for_metrics(port)[("ferret_endpoint_circuit_open", (("endpoint", endpoint),))] == 0


def test_an_open_circuit_to_the_nous_server_fails_jobs_fast_with_a_message_naming_it(producer, start_workers,
                                                                                     sample_nous):
    sample_nous.slow_terms, sample_nous.delay = {"btc"}, 30.0
    start_workers(1, extra_env={**nous_env(sample_nous, timeout_seconds=1), "FERRET_BREAKER__FAILURES": "2",
                                "FERRET_BREAKER__COOLDOWN_SECONDS": "30"})
    ask = {"query": "BTC", "namespace": "default", "deadline_seconds": 3, "options": {"cache": False}}
    results = [producer.wait(producer.enqueue(ask), 30) for _ in range(3)]
    last = results[-1]
    assert last.status == "failed" and "circuit open" in last.error and "nous" in last.error
    assert last.stats.circuit_open and last.stats.circuit_open[0].startswith("nous http://127.0.0.1")
    assert last.timestamps.finished_at - last.timestamps.started_at < 1.0
    assert CircuitOpen.__name__ not in last.error  # the message, not the exception's name
