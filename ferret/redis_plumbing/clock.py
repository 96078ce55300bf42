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
from typing import TYPE_CHECKING, Any, Protocol

import redis

if TYPE_CHECKING:
    import redis.asyncio as aredis


class Clock(Protocol):
    def time(self) -> float:
        """Epoch seconds."""
        ...


class HostClock:
    """The host's own clock: for code with no Redis (tests, benchmarks of one process)."""

    def time(self) -> float:
        return time.time()


class ClockAnchor:
    """The rule of Redis's clock, with no I/O: when a reading of ``TIME`` is due, what a reading (or a failed
    one) makes of the state, and the time from the last reading. ``RedisClock`` (blocking) and
    ``AsyncRedisClock`` (asyncio) only send the ``TIME`` it asks for."""

    def __init__(self, refresh_seconds: float = 30.0) -> None:
        self.refresh = refresh_seconds
        self.anchor: tuple[float, float] | None = None  # (Redis epoch seconds, local monotonic) at the reading
        self.next_reading = 0.0  # monotonic

    def copy(self) -> ClockAnchor:
        twin = ClockAnchor(self.refresh)
        twin.anchor, twin.next_reading = self.anchor, self.next_reading
        return twin

    def due(self, monotonic: float) -> bool:
        """Whether ``TIME`` should be read now."""
        return monotonic >= self.next_reading

    def record(self, reply: tuple[Any, Any], before: float, after: float) -> None:
        """A reading: ``TIME``'s reply, sent at monotonic ``before`` and answered at ``after``."""
        seconds, micros = reply
        self.anchor = (int(seconds) + int(micros) / 1e6, (before + after) / 2)
        self.next_reading = after + self.refresh

    def failed(self, monotonic: float) -> None:
        """Redis did not answer: try again in a second; meanwhile the last reading goes on."""
        self.next_reading = monotonic + 1.0

    def time(self) -> float:
        """Redis's time now, from the last reading (the host's clock before any)."""
        anchor = self.anchor
        if anchor is None:
            return time.time()
        return anchor[0] + (time.monotonic() - anchor[1])

    @property
    def offset(self) -> float | None:
        """Redis's clock minus this host's, in seconds (None before the first reading)."""
        anchor = self.anchor
        if anchor is None:
            return None
        return anchor[0] + (time.monotonic() - anchor[1]) - time.time()


class RedisClock:
    """Redis's clock through a blocking client (``ClockAnchor``'s readings sent with it)."""

    def __init__(self, client: redis.Redis, refresh_seconds: float = 30.0,
                 anchor: ClockAnchor | None = None) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.rule = anchor if anchor is not None else ClockAnchor(refresh_seconds)

    def for_client(self, client: redis.Redis) -> RedisClock:
        """This clock, reading through ``client`` from now on (a forked child's
        connection), with the reading it already has."""
        return RedisClock(client, anchor=self.rule.copy())

    def read(self) -> None:
        """Read Redis's ``TIME`` now (raises ``redis.RedisError`` when it cannot)."""
        before = time.monotonic()
        reply = self._client.time()
        after = time.monotonic()
        with self._lock:
            self.rule.record(reply, before, after)

    def time(self) -> float:
        now = time.monotonic()
        if self.rule.due(now):
            try:
                self.read()
            except redis.RedisError:
                with self._lock:
                    self.rule.failed(now)
        return self.rule.time()

    def last(self) -> float:
        """The time from the last reading, without a round trip (the host's clock before any)."""
        return self.rule.time()

    @property
    def offset(self) -> float | None:
        return self.rule.offset


class AsyncRedisClock:
    """Redis's clock through an asyncio client: ``TIME`` awaited when ``ClockAnchor`` says a reading is due."""

    def __init__(self, client: aredis.Redis, refresh_seconds: float = 30.0) -> None:
        self._client = client
        self.rule = ClockAnchor(refresh_seconds)

    async def time(self) -> float:
        now = time.monotonic()
        if self.rule.due(now):
            try:
                before = time.monotonic()
                reply = await self._client.time()
                self.rule.record(reply, before, time.monotonic())
            except redis.RedisError:
                self.rule.failed(now)
        return self.rule.time()

    def last(self) -> float:
        """The time from the last reading, without a round trip (the host's clock before any)."""
        return self.rule.time()
