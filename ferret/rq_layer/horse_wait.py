"""Waiting on a work horse's answer without losing it to a signal.

RQ's forking worker waits on its horse inside its monitor's timer: ``SIGALRM`` every
``job_monitoring_interval``, whose handler raises ``HorseMonitorTimeoutException`` so the monitor can send
heart-beats and call the wait again. A handler that raises may raise just after a read returned, before
what it read is kept, and the answer is gone. Python runs a signal's handler in the main thread at its next
check, which comes right after a call returns; the kernel may give the signal to any thread of the process
(the job pulse's), and then the main thread's read returns first and the raise follows it.

So the answer is read with the timer *noted* (``timer_noted``: its handler records that it came, and does
not raise), by a wait that polls the pipe and ends by itself when the timer came or the interval passed on
this process's own clock (``Bound``), raising the monitor's exception only then, when nothing read can be
lost. The wait never depends on a signal reaching it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rq.timeouts import HorseMonitorTimeoutException

POLL_SECONDS = 0.5  # the longest one poll of the pipe lasts, so a noted timer is seen this soon


@dataclass
class NotedTimer:
    """The monitor's timer, replaced for the wait: whether it came."""

    came: bool = False

    def __call__(self, _signum: int, _frame: Any) -> None:
        self.came = True


@contextlib.contextmanager
def timer_noted() -> Iterator[NotedTimer]:
    """``SIGALRM``'s handler replaced by a ``NotedTimer`` for the duration (the previous one restored after).
    Off the main thread no Python handler runs anyway, and nothing is replaced."""
    timer = NotedTimer()
    if threading.current_thread() is not threading.main_thread():
        yield timer
        return
    previous = signal.signal(signal.SIGALRM, timer)
    try:
        yield timer
    finally:
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Bound:
    """When a wait ends without its answer: the timer came, or ``seconds`` passed on ``clock``."""

    timer: NotedTimer
    seconds: float
    clock: Callable[[], float] = time.monotonic
    ends_at: float = field(init=False)

    def __post_init__(self) -> None:
        self.ends_at = self.clock() + self.seconds

    def left(self) -> float:
        """Seconds the wait may still last (0 once it is over)."""
        return 0.0 if self.timer.came else max(0.0, self.ends_at - self.clock())


def read_byte(fd: int, bound: Bound) -> bytes:
    """One byte from ``fd`` (``b""`` at end of file: the writer is gone), waited for within ``bound``; past
    it, RQ's ``HorseMonitorTimeoutException`` (nothing was read)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while (left := bound.left()) > 0:
        if poller.poll(min(left, POLL_SECONDS) * 1000):
            return os.read(fd, 1)
    raise HorseMonitorTimeoutException("the work horse has not answered yet")
