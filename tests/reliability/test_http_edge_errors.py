"""``ferret serve``'s answers when things go wrong, all in the one JSON shape (``{"error": {"code", "message"}}``):
Redis gone (503, Retry-After, one log line, no traceback), a body that is not UTF-8 or nests too deep, an
unknown route or method; wrong keys slowed down past their rate without a Redis read each; and browsers of the
configured origins answered (CORS), preflights before any key."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import RedisServer
from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.reliability

QUERY = {"query": "where do I fly", "wait_seconds": 1}


def _shape(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == code and error["message"], error


def test_redis_away_is_a_503_with_retry_after_and_no_traceback(env, serve, tmp_path):  # noqa: F811
    (tmp_path / "redis").mkdir()
    private = RedisServer(tmp_path / "redis")
    own = {**env, "FERRET_REDIS__URL": private.url}
    try:
        served = serve(extra_env={"FERRET_REDIS__URL": private.url})
        key = make_key(own, "-n", "alice")
        url = f"{served.url}/v1/namespaces/alice"
        assert httpx.get(f"{url}/conversations/c/context", headers=bearer(key), timeout=30).status_code == 200
    finally:
        private.stop()
    for answered in (httpx.post(f"{url}/query", json=QUERY, headers=bearer(key), timeout=60),
                     httpx.get(f"{url}/conversations/c/context", headers=bearer(key), timeout=60),
                     httpx.post(f"{url}/memories", json={"memories": [{"id": "m", "content_body": "x"}]},
                                headers=bearer(make_key(env, "-n", "alice")), timeout=60)):
        _shape(answered, 503, "unavailable")
        assert int(answered.headers["retry-after"]) >= 1
    assert httpx.get(f"{served.url}/readyz", timeout=60).status_code == 503
    logged = served.logged()
    assert "Traceback" not in logged and "Exception in ASGI application" not in logged, logged
    assert logged.count("Redis did not answer") == 3  # one line a request


def test_malformed_bodies_and_unknown_routes_answer_in_the_one_shape(env, serve, redis_client):  # noqa: F811
    served = serve()
    key = make_key(env, "-n", "alice")
    query = f"{served.url}/v1/namespaces/alice/query"
    headers = {**bearer(key), "content-type": "application/json"}
    _shape(httpx.post(query, content=b'{"query": "\xff\xfe"}', headers=headers, timeout=30), 400, "bad_body")
    deep = b"[" * 100_000 + b"]" * 100_000
    answered = httpx.post(query, content=deep, headers=headers, timeout=30)
    assert answered.status_code in (400, 422), answered.text
    _shape(answered, answered.status_code, "bad_body" if answered.status_code == 400 else "invalid_request")
    _shape(httpx.get(f"{served.url}/nowhere", timeout=30), 404, "not_found")
    _shape(httpx.get(f"{served.url}/v1/namespaces/alice/nowhere", headers=bearer(key), timeout=30), 404,
           "not_found")
    _shape(httpx.get(query, headers=bearer(key), timeout=30), 405, "method_not_allowed")
    assert "Traceback" not in served.logged()


def _hgetall_calls(redis_client) -> int:
    stats = redis_client.info("commandstats").get("cmdstat_hgetall", {})
    return int(stats.get("calls", 0))


def test_wrong_keys_past_their_rate_get_429_without_a_redis_read(env, serve, redis_client):  # noqa: F811
    served = serve(extra_env={"FERRET_HTTP__FAILED_KEYS_PER_ID": "5/minute",
                              "FERRET_HTTP__FAILED_KEYS_PER_ADDRESS": "1000/minute"})
    key = make_key(env, "-n", "alice")
    key_id, secret = key.split("_")[1], key.split("_", 2)[2]
    wrong = [f"fk_{key_id}_{secret[:-6]}{n:06d}" for n in range(300)]
    url = f"{served.url}/v1/namespaces/alice/conversations/c/context"
    before = _hgetall_calls(redis_client)
    with httpx.Client(timeout=30) as http:
        statuses = [http.get(url, headers=bearer(guess)).status_code for guess in wrong]
        assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
        blocked = http.get(url, headers=bearer(wrong[0]))
        _shape(blocked, 429, "too_many_failures")
        assert 1 <= int(blocked.headers["retry-after"]) <= 60
        looked_up = _hgetall_calls(redis_client) - before
        assert looked_up == 5, looked_up  # one read a guess up to the limit, none after
        assert http.get(url, headers=bearer(key)).status_code == 429  # the id itself waits out the window
    counted = re.findall(r'^ferret_http_refusals_total\{reason="too_many_failures"\} ([0-9.]+)$',
                         httpx.get(f"{served.url}/metrics").text, re.MULTILINE)
    assert counted == ["297.0"]  # the 295 guesses past the limit, the blocked one and the real key


def test_a_configured_origin_is_answered_and_its_preflight_needs_no_key(env, serve, redis_client):  # noqa: F811
    served = serve(extra_env={"FERRET_HTTP__CORS_ORIGINS": '["https://app.example"]'})
    key = make_key(env, "-n", "alice")
    url = f"{served.url}/v1/namespaces/alice/conversations/c/context"
    asking = {"origin": "https://app.example", "access-control-request-method": "GET",
              "access-control-request-headers": "authorization"}
    preflight = httpx.options(url, headers=asking, timeout=30)
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
    answered = httpx.get(url, headers={**bearer(key), "origin": "https://app.example"}, timeout=30)
    assert answered.status_code == 200 and answered.headers["access-control-allow-origin"] == "https://app.example"
    refused = httpx.get(url, headers={"origin": "https://app.example"}, timeout=30)
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == "https://app.example"
    other = httpx.options(url, headers={**asking, "origin": "https://evil.example"}, timeout=30)
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    plain = serve()  # no origin configured: no CORS header at all
    assert "access-control-allow-origin" not in httpx.get(
        f"{plain.url}/v1/namespaces/alice/conversations/c/context",
        headers={**bearer(key), "origin": "https://app.example"}, timeout=30).headers
