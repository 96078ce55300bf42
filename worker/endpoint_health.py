"""The circuit breakers of a worker process's outside endpoints, as httpx
transports: every HTTP client of a chat model, an embeddings endpoint or a
Nous server sends through ``EndpointHealth.transport(...)``, which skips
the call while the endpoint's circuit is open (``ferret.breaker``) and
counts what the endpoint answered: a transport error (unreachable, timed
out) or a 5xx is a failure, any other answer a success (a 4xx says the
endpoint is up). A request the job gave up waiting for is a failure from
the moment it did, counted then and not again when the request ends
(``ferret.worker.abandoned_calls``).

The skip surfaces as ``CircuitOpen`` from the client's call; each client
turns it into its own failure (the re-rank's and the agent's reason
``circuit_open``, the backends' ``BackendUnavailable``). Which endpoints a
job skipped goes in its stats (``circuit_open``), and from there into the
metrics, for both worker classes.
"""

from __future__ import annotations

import threading

import httpx
import redis

from ferret.breaker import Breaker, BreakerRules
from ferret.settings import BreakerSettings
from ferret.worker.abandoned_calls import current_call


class GuardedTransport(httpx.BaseTransport):
    def __init__(self, breaker: Breaker, inner: httpx.BaseTransport | None = None) -> None:
        self.breaker = breaker
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        breaker = self.breaker
        breaker.check()
        call = current_call()
        watch = call.watch(breaker.failed) if call is not None else None
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError:
            if watch is None or watch.settle():
                breaker.failed()
            raise
        except BaseException:
            if watch is not None:
                watch.settle()
            raise
        if watch is not None and not watch.settle():
            return response  # the job gave up on it: counted as failed then
        if response.status_code >= 500:
            breaker.failed()
        else:
            breaker.succeeded()
        return response

    def close(self) -> None:
        self.inner.close()


class EndpointHealth:
    """This process's breakers, one per endpoint (made when a client asks for its transport)."""

    def __init__(self, client: redis.Redis, settings: BreakerSettings) -> None:
        self.client = client
        self.enabled = settings.enabled
        self.rules = BreakerRules(settings.failures, settings.window_seconds, settings.cooldown_seconds)
        self.breakers: dict[str, Breaker] = {}
        self._lock = threading.Lock()

    def transport(self, endpoint: str, inner: httpx.BaseTransport | None = None) -> httpx.BaseTransport | None:
        """The transport for a client of ``endpoint`` (``inner``, or httpx's own, guarded when breakers are on)."""
        if not self.enabled:
            return inner
        with self._lock:
            breaker = self.breakers.setdefault(endpoint, Breaker(self.client, endpoint, self.rules))
        return GuardedTransport(breaker, inner)

    def skips(self) -> dict[str, int]:
        """Calls skipped so far, by endpoint (compare two readings for what a job skipped)."""
        return {endpoint: breaker.skipped for endpoint, breaker in self.breakers.items()}

    def skipped_since(self, before: dict[str, int]) -> list[str]:
        """The endpoints with a call skipped since the reading ``before``."""
        return sorted(endpoint for endpoint, count in self.skips().items() if count > before.get(endpoint, 0))
