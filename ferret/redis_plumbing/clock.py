"""One clock for every machine: Redis's.

Producers stamp a job's enqueue time and deadline, workers judge whether it
is late, reapers whether a worker is lost: times taken on different hosts,
whose clocks drift. Every such time is read from Redis's clock (``TIME``),
the one clock all of them share.

Cheaply: a ``RedisClock`` asks Redis for ``TIME`` once, notes the local
monotonic clock at that moment (the middle of the round trip), and from then
on answers ``Redis time at the reading + monotonic time elapsed since``, with
no round trip. It reads ``TIME`` again every ``refresh_seconds`` (30 s) to
follow Redis's own clock. A host whose wall clock is set wrong, or stepped
by NTP, is not affected: its wall clock is never read. The error is half the
round trip of the reading (well under a millisecond on a LAN) plus the
monotonic clock's drift over 30 s (parts per million).

When Redis cannot be read, the last reading goes on (a job cannot be
served without Redis anyway); before any reading, the host's clock stands in.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import redis


class Clock(Protocol):
    def time(self) -> float:
        """Epoch seconds."""
        ...


class HostClock:
    """The host's own clock: for code with no Redis (tests, benchmarks of one process)."""

    def time(self) -> float:
        return time.time()


class RedisClock:
    def __init__(self, client: redis.Redis, refresh_seconds: float = 30.0) -> None:
        self._client = client
        self._refresh = refresh_seconds
        self._lock = threading.Lock()
        self._anchor: tuple[float, float] | None = None  # (Redis epoch seconds, local monotonic) at the reading
        self._next_reading = 0.0  # monotonic

    def for_client(self, client: redis.Redis) -> RedisClock:
        """This clock, reading through ``client`` from now on (a forked child's
        connection), with the reading it already has."""
        twin = RedisClock(client, self._refresh)
        twin._anchor, twin._next_reading = self._anchor, self._next_reading
        return twin

    def read(self) -> None:
        """Read Redis's ``TIME`` now (raises ``redis.RedisError`` when it cannot)."""
        before = time.monotonic()
        seconds, micros = self._client.time()
        after = time.monotonic()
        with self._lock:
            self._anchor = (int(seconds) + int(micros) / 1e6, (before + after) / 2)
            self._next_reading = after + self._refresh

    def time(self) -> float:
        now = time.monotonic()
        if now >= self._next_reading:
            try:
                self.read()
            except redis.RedisError:
                with self._lock:
                    self._next_reading = now + 1.0  # try again soon; meanwhile the last reading goes on
        anchor = self._anchor
        if anchor is None:
            return time.time()
        return anchor[0] + (time.monotonic() - anchor[1])

    @property
    def offset(self) -> float | None:
        """Redis's clock minus this host's, in seconds (None before the first reading)."""
        anchor = self._anchor
        if anchor is None:
            return None
        return anchor[0] + (time.monotonic() - anchor[1]) - time.time()
