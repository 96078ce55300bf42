"""Redis's clock, read without a round trip per call."""

from __future__ import annotations

import time

import pytest
import redis

from ferret.redis_plumbing.clock import RedisClock


class ScriptedRedis:
    """Answers TIME ``ahead`` seconds off the host's clock; counts the calls; can be made to fail."""

    def __init__(self, ahead: float) -> None:
        self.ahead, self.calls, self.down = ahead, 0, False

    def time(self) -> tuple[int, int]:
        self.calls += 1
        if self.down:
            raise redis.ConnectionError("down")
        now = time.time() + self.ahead
        return int(now), int((now % 1) * 1e6)


def test_it_reads_redis_once_and_follows_the_monotonic_clock():
    server = ScriptedRedis(ahead=1000.0)
    clock = RedisClock(server, refresh_seconds=60)  # type: ignore[arg-type]
    first = clock.time()
    assert first == pytest.approx(time.time() + 1000.0, abs=0.05)
    for _ in range(1000):
        clock.time()
    assert server.calls == 1
    assert clock.offset == pytest.approx(1000.0, abs=0.05)


def test_it_reads_again_after_the_refresh_interval():
    server = ScriptedRedis(ahead=-30.0)
    clock = RedisClock(server, refresh_seconds=0.05)  # type: ignore[arg-type]
    clock.time()
    time.sleep(0.06)
    server.ahead = -20.0  # Redis's clock moved (or the reading was off)
    assert clock.time() == pytest.approx(time.time() - 20.0, abs=0.05)
    assert server.calls == 2


def test_redis_down_keeps_the_last_reading_and_before_any_the_host_clock_stands_in():
    server = ScriptedRedis(ahead=500.0)
    server.down = True
    clock = RedisClock(server, refresh_seconds=0.0)  # type: ignore[arg-type]
    assert clock.time() == pytest.approx(time.time(), abs=0.05)
    server.down = False
    clock.rule.next_reading = 0.0
    assert clock.time() == pytest.approx(time.time() + 500.0, abs=0.05)
    server.down = True
    clock.rule.next_reading = 0.0
    assert clock.time() == pytest.approx(time.time() + 500.0, abs=0.05)


def test_a_forked_childs_clock_keeps_the_reading():
    server = ScriptedRedis(ahead=42.0)
    clock = RedisClock(server, refresh_seconds=60)  # type: ignore[arg-type]
    clock.time()
    other = ScriptedRedis(ahead=0.0)
    child = clock.for_client(other)  # type: ignore[arg-type]
    assert child.time() == pytest.approx(time.time() + 42.0, abs=0.05)
    assert other.calls == 0
