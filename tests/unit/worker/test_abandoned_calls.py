"""A request a job gave up waiting for counts as its endpoint's failure when the job gives up, and once.

Each request is held by the endpoint until the test lets it end, and a call is given up only once its
request is known to be in flight (``arrived``): nothing here turns on how fast a thread starts."""

from __future__ import annotations

import threading

import fakeredis
import httpx
import pytest

from ferret.breaker import CircuitOpen
from ferret.settings import BreakerSettings
from ferret.worker.endpoint_health import EndpointHealth
from ferret.worker.pipeline import parallel
from ferret.worker.pipeline.parallel import TIMED_OUT, call_with_timeout, collect, run_parallel, start

ENDPOINT = "chat http://llm"


class HeldEndpoint:
    """An endpoint that answers each request only when the test lets it (``answer``)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.answer: httpx.Response | Exception = httpx.ReadTimeout("no answer")
        self.arrived = threading.Semaphore(0)  # one release per request that reached the endpoint
        self.ended = threading.Semaphore(0)  # one release per request that left the transport

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.arrived.release()
        assert self.release.wait(30)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def task(self, http: httpx.Client):
        def call() -> int:
            try:
                return http.get("/v1/chat/completions").status_code
            finally:
                self.ended.release()
        return call

    def wait_arrived(self, requests: int) -> None:
        for _ in range(requests):
            assert self.arrived.acquire(timeout=30)

    def wait_ended(self, requests: int) -> None:
        for _ in range(requests):
            assert self.ended.acquire(timeout=30)

    def given_up(self, task) -> None:
        """``task`` started on the pool, and given up on once its request is in flight."""
        started = start(task)
        self.wait_arrived(1)
        assert collect(started, 0) is TIMED_OUT


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def _guarded(client, endpoint: HeldEndpoint, failures: int) -> tuple[EndpointHealth, httpx.Client]:
    health = EndpointHealth(client, BreakerSettings(failures=failures, window_seconds=60, cooldown_seconds=60))
    http = httpx.Client(transport=health.transport(ENDPOINT, httpx.MockTransport(endpoint.handle)),
                        base_url="http://llm")
    return health, http


def _failures(client, health: EndpointHealth) -> int:
    return int(client.get(health.breakers[ENDPOINT]._keys[0]) or 0)


@pytest.mark.parametrize("late", [httpx.ReadTimeout("read timed out"), httpx.Response(503), httpx.Response(200)],
                         ids=["timeout", "5xx", "answer"])
def test_a_request_given_up_counts_as_failed_when_the_job_gives_up_and_not_again_when_it_ends(client, late):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=3)
    endpoint.given_up(endpoint.task(http))
    assert _failures(client, health) == 1  # the request is still held: the job's giving up counted it
    endpoint.answer = late
    endpoint.release.set()
    endpoint.wait_ended(1)
    # neither counted twice (a timeout, a 5xx) nor taken for the success that ends a run of failures
    assert _failures(client, health) == 1


def test_giving_up_on_enough_requests_opens_the_circuit_before_any_of_them_ends(client, monkeypatch):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=2)
    # run_parallel's wait ends (its timeout, as it were) once both requests are in flight
    monkeypatch.setattr(parallel, "wait", lambda futures, timeout: endpoint.wait_arrived(len(futures)))
    slots = run_parallel([endpoint.task(http), endpoint.task(http)], timeout=30)
    assert slots == [TIMED_OUT, TIMED_OUT]
    with pytest.raises(CircuitOpen):
        http.get("/v1/chat/completions")  # the next job's call is skipped at once
    assert health.breakers[ENDPOINT].opened == 1
    endpoint.release.set()
    endpoint.wait_ended(2)
    assert health.breakers[ENDPOINT].opened == 1


def test_a_request_that_ends_in_time_is_counted_by_its_outcome_as_before(client):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=3)
    endpoint.answer = httpx.Response(503)
    endpoint.release.set()
    assert call_with_timeout(endpoint.task(http), 30) == 503
    assert call_with_timeout(endpoint.task(http), 30) == 503
    assert _failures(client, health) == 2
    endpoint.answer = httpx.Response(200)
    assert call_with_timeout(endpoint.task(http), 30) == 200
    assert _failures(client, health) == 0  # a success ends the run of failures


def test_a_request_made_after_the_job_gave_up_counts_its_own_outcome(client):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=5)
    first_given_up = threading.Event()

    def two_requests() -> int:
        with pytest.raises(httpx.ReadTimeout):
            endpoint.task(http)()  # given up while held
        assert first_given_up.wait(30)
        return endpoint.task(http)()  # made after: the job no longer waits, its outcome is its own

    endpoint.given_up(two_requests)
    first_given_up.set()
    endpoint.release.set()
    endpoint.wait_ended(2)
    assert _failures(client, health) == 2  # the first at the giving up, the second at its own timeout


def test_a_call_started_within_one_given_up_is_given_up_with_it(client):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=3)

    def sub_query() -> object:  # a sub-query waiting on its semantic search, as ``_retrieve`` does
        return call_with_timeout(endpoint.task(http), 30)

    endpoint.given_up(sub_query)
    assert _failures(client, health) == 1  # counted as the sub-query was given up, the inner wait not over
    endpoint.release.set()
    endpoint.wait_ended(1)
    assert _failures(client, health) == 1


def test_a_request_that_ended_in_another_error_is_not_counted_when_the_job_gives_up_later(client):
    endpoint = HeldEndpoint()
    health, http = _guarded(client, endpoint, failures=3)
    endpoint.answer = ValueError("not an HTTP failure")
    endpoint.release.set()
    still_running = threading.Event()

    def task() -> None:
        with pytest.raises(ValueError):
            endpoint.task(http)()  # ended, in an error that is not the endpoint's
        endpoint.arrived.release()  # the test may give up now: the task goes on without a request in flight
        assert still_running.wait(30)

    started = start(task)
    endpoint.wait_arrived(2)  # the request's arrival, then the task's signal
    assert collect(started, 0) is TIMED_OUT
    still_running.set()
    assert _failures(client, health) == 0
