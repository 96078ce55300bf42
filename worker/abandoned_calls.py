"""A call a job stopped waiting for, and what an outside endpoint's breaker counts of it.

Every backend and chat call of a job runs on the pool (``ferret.worker.pipeline.parallel``), and the job
stops waiting for it at its timeout: the call goes on in its thread until its own HTTP timeout ends it, a
few ms later (on a loaded machine, longer). Its breaker (``ferret.worker.endpoint_health``) counted the
failure only then, so the next job could send one more call to an endpoint that had already failed
``breaker.failures`` times in a row.

Now the job's giving up is the failure: each task on the pool runs as a ``Call`` (a context variable its
thread sees), a guarded request registers its breaker with the call while it is in flight, and giving up
counts each in-flight request's failure at once, in the job's thread. The request's own outcome, when it
comes, is then left uncounted: each request is counted once. A call started from within another (a
sub-query's semantic search or graph step, beside its lexical search) is given up with it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[Call | None] = contextvars.ContextVar("ferret_call", default=None)


class Watch:
    """One request in flight within a call: ``failed`` counts its failure."""

    __slots__ = ("call", "failed")

    def __init__(self, call: Call, failed: Callable[[], None]) -> None:
        self.call = call
        self.failed = failed

    def settle(self) -> bool:
        """The request ended: whether its outcome is still to count (False: giving up counted it)."""
        return self.call.settle(self)


class Call:
    """A task a job runs on the pool, which the job may stop waiting for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given_up = False
        self._in_flight: list[Watch] = []
        self._started: list[Call] = []  # calls started from within this one

    def run(self, task: Callable[[], T]) -> T:
        """``task``, with this call as its thread's current one."""
        token = _CURRENT.set(self)
        try:
            return task()
        finally:
            _CURRENT.reset(token)

    def watch(self, failed: Callable[[], None]) -> Watch | None:
        """A request begins: ``failed`` counts its failure if the job gives up on it. None when the job
        already has: the request's outcome is then its own to count."""
        with self._lock:
            if self._given_up:
                return None
            watch = Watch(self, failed)
            self._in_flight.append(watch)
            return watch

    def settle(self, watch: Watch) -> bool:
        """The request ended: whether its outcome is still to count (False: giving up counted it)."""
        with self._lock:
            try:
                self._in_flight.remove(watch)
            except ValueError:
                return False
            return True

    def adopt(self, call: Call) -> None:
        """``call`` was started from within this one: given up with it (at once, if it already was)."""
        with self._lock:
            if not self._given_up:
                self._started.append(call)
                return
        call.give_up()

    def give_up(self) -> None:
        """The job stops waiting: each request in flight counts as failed, now; so do those of the calls
        started from within this one."""
        with self._lock:
            self._given_up = True
            in_flight, self._in_flight = self._in_flight, []
            started, self._started = self._started, []
        for watch in in_flight:
            watch.failed()
        for call in started:
            call.give_up()


def current_call() -> Call | None:
    """The call this thread runs, if it runs one for a job."""
    return _CURRENT.get()
