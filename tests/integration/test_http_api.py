"""``ferret serve`` end to end: the real server process, real workers and a real redis-server; every operation
over HTTP with a key made by ``ferret keys create``, as a user in another language would script it."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import wait_until
from tests.integration.http_support import bearer, make_key, serve  # noqa: F401  (fixture)

pytestmark = pytest.mark.integration

MEMORIES = [
    {"id": "rome", "type": "plan", "content_body": "Flight to Rome on 3 May, economy class, seat 14C"},
    {"id": "anna", "type": "event", "content_body": "Dinner party for Anna on Friday at eight"},
]


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_every_operation_over_http(env, start_workers, serve, redis_client, worker_class):  # noqa: F811
    start_workers(1, "--worker-class", worker_class)
    served = serve()
    key = make_key(env, "-n", "kitchen", "-n", "moves", "--label", "tests")
    with httpx.Client(base_url=served.url, headers=bearer(key), timeout=60) as http:
        assert http.post("/v1/namespaces/kitchen/memories", json={"memories": MEMORIES}).json() == {"written": 2}

        answered = http.post("/v1/namespaces/kitchen/query", json={"query": "flight to Rome", "options":
                                                                   {"max_results": 3}})
        assert answered.status_code == 200, answered.text
        result = answered.json()
        assert result["status"] == "ok" and result["namespace"] == "kitchen"
        assert result["results"][0]["id"] == "rome" and "Rome" in result["context"]

        enqueued = http.post("/v1/namespaces/kitchen/jobs", json={"query": "dinner for Anna", "queue": "batch"})
        assert enqueued.status_code == 202
        job_id = enqueued.json()["job_id"]
        assert wait_until(lambda: http.get(f"/v1/namespaces/kitchen/jobs/{job_id}").json()["status"] is not None, 60)
        job = http.get(f"/v1/namespaces/kitchen/jobs/{job_id}").json()
        assert job["status"] == "ok" and job["result"]["results"][0]["id"] == "anna"
        spans = http.get(f"/v1/namespaces/kitchen/jobs/{job_id}/trace").json()
        assert spans and "spans" in spans

        started = http.post("/v1/namespaces/kitchen/conversations/trip/prefetch", json={"query": "dinner party"})
        assert started.status_code == 202
        assert wait_until(lambda: http.get("/v1/namespaces/kitchen/conversations/trip/context").json()["ready"], 60)
        context = http.get("/v1/namespaces/kitchen/conversations/trip/context").json()
        assert context["results"][0]["id"] == "anna" and context["stale"] is False

        assert http.post("/v1/namespaces/kitchen/memories/forget", json={"ids": ["anna", "nope"]}).json() == \
            {"deleted": 1}
        assert http.get("/v1/namespaces/kitchen/conversations/trip/context").json()["stale"] is True

        moves = [{"id": "paris", "content_body": "The user lives in Paris", "temporal_event_time": "2025-01-10"},
                 {"id": "berlin", "temporal_event_time": "2026-02-01", "content_body": "An update from February: "
                  "the user moved out of Paris last month and now lives in a small flat in Berlin"}]
        assert http.post("/v1/namespaces/moves/memories", json={"memories": moves}).json() == {"written": 2}
        where = {"query": "where does the user live?"}
        plain = http.post("/v1/namespaces/moves/query", json=where).json()
        recent = http.post("/v1/namespaces/moves/query", json={**where, "options": {"recency_half_life_days": 90}})
        assert plain["results"][0]["id"] == "paris" and recent.json()["results"][0]["id"] == "berlin"

        bad = http.post("/v1/namespaces/kitchen/query", json={"query": "x", "options": {"max_results": 0}})
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "options.max_results"
        bad_memory = http.post("/v1/namespaces/kitchen/memories", json={"memories": [{"id": "x", "content_body": 5}]})
        assert bad_memory.status_code == 422 and bad_memory.json()["error"]["field"] == "memories.0.content_body"
        unknown = http.post("/v1/namespaces/kitchen/query", json={"query": "x", "namespace": "other"})
        assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "namespace"

        assert http.get(f"/v1/namespaces/kitchen/jobs/{'0' * 32}").status_code == 404
        assert http.get("/readyz").json() == {"status": "ready"}
        schema = http.get("/openapi.json").json()
        assert "/v1/namespaces/{namespace}/query" in schema["paths"]
        scraped = http.get("/metrics").text
    assert 'ferret_http_requests_total{method="POST",route="/v1/namespaces/{namespace}/query",status="200"} 3.0' \
        in scraped
    assert 'status="422"' in scraped
    assert key not in served.logged()


def test_a_query_that_outlives_its_wait_says_not_yet_with_its_job(env, serve, redis_client):  # noqa: F811
    served = serve()  # no worker: nothing answers
    key = make_key(env, "-n", "kitchen")
    started = time.monotonic()
    answered = httpx.post(f"{served.url}/v1/namespaces/kitchen/query", headers=bearer(key), timeout=60,
                          json={"query": "anything", "wait_seconds": 1})
    assert answered.status_code == 504
    error = answered.json()["error"]
    assert error["code"] == "not_yet" and error["job_id"] and error["rq_state"] == "queued"
    assert time.monotonic() - started >= 1
