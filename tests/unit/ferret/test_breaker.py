from __future__ import annotations

import time

import fakeredis
import httpx
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ferret.breaker import Breaker, BreakerRules, CircuitOpen
from ferret.settings import BreakerSettings
from ferret.worker.endpoint_health import EndpointHealth

RULES = BreakerRules(failures=3, window_seconds=5.0, cooldown_seconds=0.3, refresh_seconds=0.0)


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def test_failures_in_a_row_open_the_circuit_for_every_process_until_the_cool_down_ends(client):
    here, there = Breaker(client, "chat http://llm", RULES), Breaker(client, "chat http://llm", RULES)
    for _ in range(2):
        here.check()
        here.failed()
    there.check()  # two failures: still closed
    here.failed()
    with pytest.raises(CircuitOpen, match="chat http://llm is failing"):
        here.check()
    with pytest.raises(CircuitOpen):
        there.check()  # another process sees it through Redis
    assert here.opened == 1 and here.skipped == 1 and there.skipped == 1
    time.sleep(0.35)
    here.check()
    there.check()


def test_a_success_ends_a_run_of_failures(client):
    breaker = Breaker(client, "embeddings http://e", RULES)
    breaker.failed()
    breaker.failed()
    breaker.succeeded()
    breaker.failed()
    breaker.failed()
    breaker.check()  # 2 + 2 failures with a success between: not 3 in a row


def test_on_probation_one_failure_opens_again_and_one_success_closes(client):
    breaker = Breaker(client, "nous http://n", RULES)
    for _ in range(3):
        breaker.failed()
    time.sleep(0.35)
    breaker.check()  # cool-down over: on probation
    breaker.failed()
    with pytest.raises(CircuitOpen):
        breaker.check()
    time.sleep(0.35)
    breaker.check()
    breaker.succeeded()
    assert not client.exists(*breaker._keys)  # closed: nothing left in Redis
    breaker.failed()
    breaker.check()  # one failure after a success is not enough


def test_unreachable_redis_leaves_the_endpoint_callable(tmp_path):
    breaker = Breaker(redis.Redis(unix_socket_path=str(tmp_path / "no-such.sock"),
                                  retry=Retry(NoBackoff(), 0)), "chat http://llm", RULES)
    for _ in range(5):
        breaker.failed()
    breaker.check()


def test_the_transport_counts_5xx_and_transport_errors_and_skips_calls_while_open(client):
    answers = iter([httpx.Response(500), httpx.ConnectError("refused"), httpx.Response(503), httpx.Response(200)])
    calls = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        found = next(answers)
        if isinstance(found, Exception):
            raise found
        return found

    health = EndpointHealth(client, BreakerSettings(failures=3, window_seconds=5, cooldown_seconds=60))
    http = httpx.Client(transport=health.transport("nous http://n", httpx.MockTransport(answer)),
                        base_url="http://n")
    before = health.skips()
    assert http.get("/a").status_code == 500
    with pytest.raises(httpx.ConnectError):
        http.get("/b")
    assert http.get("/c").status_code == 503
    with pytest.raises(CircuitOpen):
        http.get("/d")
    assert calls == ["/a", "/b", "/c"] and health.skipped_since(before) == ["nous http://n"]
    assert health.breakers["nous http://n"].is_open()


def test_breakers_off_leave_the_transport_alone(client):
    inner = httpx.MockTransport(lambda request: httpx.Response(200))
    assert EndpointHealth(client, BreakerSettings(enabled=False)).transport("x", inner) is inner
