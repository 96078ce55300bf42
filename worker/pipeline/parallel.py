"""Stage 4 helper: run sub-query searches in parallel under a timeout.

The only place Ferret uses threads. Every backend call of a job runs on the
pool, so that none can hold the job past its budget. The pool is created once
per process (and again after a fork); tasks still running at
the timeout are abandoned, not waited for: their own backend timeouts end
them, and each outside request still in flight counts as its endpoint's
failure at once (``ferret.worker.abandoned_calls``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Generic, TypeVar

from ferret.worker.abandoned_calls import Call, current_call

T = TypeVar("T")

_POOL_SIZE = 16
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=_POOL_SIZE, thread_name_prefix="ferret-search")
            _pool_pid = os.getpid()
        return _pool


class TimedOut:
    """Marks a task that had not finished when the timeout came."""

    def __repr__(self) -> str:
        return "TimedOut()"


TIMED_OUT = TimedOut()


def run_parallel(
    tasks: Sequence[Callable[[], T]], timeout: float
) -> list[T | TimedOut | BaseException]:
    """Run ``tasks``; each slot holds a result, the exception raised, or TIMED_OUT.

    A lone task runs on the pool too: only then can a backend call that
    ignores its own timeout be abandoned at the deadline."""
    if len(tasks) == 1:
        return [_one(tasks[0], timeout)]
    started = [start(task) for task in tasks]
    wait([one.future for one in started], timeout=max(timeout, 0.0))
    slots: list[T | TimedOut | BaseException] = []
    for one in started:
        future = one.future
        if not future.done():
            one.give_up()
            slots.append(TIMED_OUT)
        elif future.exception() is not None:
            slots.append(future.exception())  # type: ignore[arg-type]
        else:
            slots.append(future.result())
    return slots


def _one(task: Callable[[], T], timeout: float) -> T | TimedOut | BaseException:
    try:
        return call_with_timeout(task, timeout)
    except Exception as exc:
        return exc


def call_with_timeout(task: Callable[[], T], timeout: float) -> T | TimedOut:
    """Run one task on the pool; TIMED_OUT if it has not finished in ``timeout``
    seconds (it is abandoned, its own I/O timeouts end it). Its exception is raised."""
    return collect(start(task), timeout)


@dataclass(frozen=True, slots=True)
class Started(Generic[T]):
    """A task running on the pool, as a call the job may give up on."""

    future: Future[T]
    call: Call

    def give_up(self) -> None:
        """Not waited for any longer: not started yet, it never will be; in flight, its outside
        requests count as failed now."""
        self.future.cancel()
        self.call.give_up()


def start(task: Callable[[], T]) -> Started[T]:
    """Start ``task`` on the pool, to be collected later (a retriever beside another). Started from
    within a task on the pool, it is given up with that one."""
    call = Call()
    within = current_call()
    if within is not None:
        within.adopt(call)
    return Started(_executor().submit(call.run, task), call)


def collect(started: Started[T], timeout: float) -> T | TimedOut:
    """The started task's result, or TIMED_OUT if it has not finished in ``timeout`` seconds
    (then it is given up). Its exception is raised."""
    future = started.future
    try:
        return future.result(timeout=max(timeout, 0.0))  # cheaper than wait() for one future
    except FutureTimeout:
        if future.done():  # the task's own TimeoutError
            raise
        started.give_up()
        return TIMED_OUT
