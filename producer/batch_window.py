"""How many lines a batch keeps in flight: enough to keep the workers busy, few enough that no line waits in
the queue long.

A line's deadline counts from its enqueue. A batch that enqueued every line first gave the last ones a wait
of (lines ahead of it) / (lines the workers drain a second): 100,000 lines on two workers at ~100 lines/s is
a thousand seconds, and every line past the first ~60,000 expired before a worker took it. So a batch
enqueues a line only while fewer than ``size()`` lines are in flight (enqueued, no result yet): the drain
rate measured over the last ``RATE_SECONDS``, times ``queue_seconds`` (the longest a line should wait: a
share of its deadline, at most ``MAX_QUEUE_SECONDS``), never over ``ceiling`` (the producer's memory: a
line in flight holds its handle and bookkeeping, about 3 KB) nor under ``least`` (a slow pool is still kept
busy); before the first result, when no rate is known (a pool that is just starting), ``floor``: small, as
a line's deadline may be short and the workers slow (the window widens as soon as results show what they
drain, since each widening lets more through). Faster workers widen the window at once; a pool that slows
down narrows it, so the lines waiting always fit in the time they have.

The rule is sans I/O (the clock injected), as the client's wait is (``ferret.producer.waiting``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

RATE_SECONDS = 10.0  # the drain rate is measured over the results of this long
QUEUE_SHARE = 0.25  # a line waits for a worker no longer than this share of its deadline
MAX_QUEUE_SECONDS = 30.0  # nor longer than this
FLOOR = 64  # lines in flight before any result came (then the window grows with the rate it lets through)
LEAST = 64  # the fewest once the rate is known
CEILING = 20_000  # at ~3 KB a line in flight: the producer holds at most ~60 MB of them


def queue_seconds_for(deadline_seconds: float) -> float:
    """The longest a line with this deadline should wait in the queue."""
    return max(1.0, min(MAX_QUEUE_SECONDS, QUEUE_SHARE * deadline_seconds))


@dataclass
class InFlightWindow:
    """The lines a batch may have in flight, from what the workers drained lately (``drained``)."""

    queue_seconds: float
    floor: int = FLOOR
    least: int = LEAST
    ceiling: int = CEILING
    clock: Callable[[], float] = time.monotonic
    _drains: deque[tuple[float, int]] = field(default_factory=deque)  # (when, lines) of recent results
    _first_at: float | None = None

    def drained(self, lines: int) -> None:
        """``lines`` more lines got their final results now."""
        if lines <= 0:
            return
        now = self.clock()
        if self._first_at is None:
            self._first_at = now
        self._drains.append((now, lines))
        self._forget_before(now - RATE_SECONDS)

    def rate(self) -> float:
        """Lines a second, over the last ``RATE_SECONDS`` (or since the first result, when sooner)."""
        now = self.clock()
        self._forget_before(now - RATE_SECONDS)
        if self._first_at is None or not self._drains:
            return 0.0
        span = max(1.0, min(RATE_SECONDS, now - self._first_at))
        return sum(lines for _, lines in self._drains) / span

    def size(self) -> int:
        """How many lines may be in flight now."""
        if self._first_at is None:
            return self.floor
        return max(self.least, min(self.ceiling, int(self.rate() * self.queue_seconds)))

    def room(self, in_flight: int) -> int:
        """How many more lines may be enqueued now, with ``in_flight`` in flight."""
        return max(0, self.size() - in_flight)

    def _forget_before(self, moment: float) -> None:
        while self._drains and self._drains[0][0] < moment:
            self._drains.popleft()
