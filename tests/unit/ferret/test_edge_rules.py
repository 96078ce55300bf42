"""The client's edge rules played with scripted replies and no Redis (as h11's tests play its protocol): the
clock's anchor and the replica wait are plain state that both runners, blocking and asyncio, read."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from ferret.redis_plumbing.clock import AsyncRedisClock, ClockAnchor, RedisClock
from ferret.redis_plumbing.replication import (
    MARK_KEY,
    RETRY_AFTER_SECONDS,
    AsyncReplicaWait,
    ReplicaPolicy,
    ReplicaWait,
)


def test_the_anchor_asks_for_a_reading_then_answers_from_it_until_the_refresh():
    rule = ClockAnchor(refresh_seconds=30.0)
    assert rule.due(time.monotonic()) and rule.offset is None
    before = time.monotonic()
    rule.record((int(time.time()) + 100, 0), before, before + 0.002)
    assert not rule.due(before + 29.0) and rule.due(before + 30.1)
    assert rule.time() == pytest.approx(time.time() + 100, abs=1.0)
    assert rule.offset == pytest.approx(100, abs=1.0)


def test_a_failed_reading_keeps_the_last_one_and_asks_again_in_a_second():
    rule = ClockAnchor()
    rule.record((int(time.time()) - 50, 0), time.monotonic(), time.monotonic())
    now = time.monotonic() + 31
    rule.failed(now)
    assert not rule.due(now + 0.5) and rule.due(now + 1.0)
    assert rule.time() == pytest.approx(time.time() - 50, abs=1.0)


def test_before_any_reading_the_host_clock_stands_in():
    assert ClockAnchor().time() == pytest.approx(time.time(), abs=0.05)


def test_no_replicas_asked_means_no_wait_and_no_command():
    assert ReplicaPolicy(0, 100).waits(time.monotonic()) is True


def test_a_wait_is_an_incr_then_wait_on_one_connection():
    policy = ReplicaPolicy(2, 150)
    assert policy.waits(time.monotonic()) is None
    assert policy.commands() == (("INCR", MARK_KEY), ("WAIT", 2, 150))
    assert policy.judge([7, 2], "the write", time.monotonic()) is True


def test_a_short_wait_backs_off_and_warns_once_a_minute(caplog):
    policy = ReplicaPolicy(1, 10)
    now = time.monotonic()
    with caplog.at_level(logging.WARNING):
        for step in range(5):
            at = now + step * (RETRY_AFTER_SECONDS + 0.1)
            assert policy.waits(at) is None
            assert policy.judge([1, 0], "the write", at) is False
            assert policy.waits(at + 0.1) is False  # the back-off: no wait for RETRY_AFTER_SECONDS
    assert len([r for r in caplog.records if "replicas within" in r.message]) == 1


class _Scripted:
    """Answers a pipeline with scripted replies and records the commands (either colour)."""

    def __init__(self, replies: list[object]) -> None:
        self.replies, self.sent = replies, []

    def pipeline(self, transaction: bool = True) -> _Scripted:
        assert transaction is False
        return self

    def __enter__(self) -> _Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> _Scripted:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def execute_command(self, *args: object) -> None:
        self.sent.append(args)

    def execute(self):  # type: ignore[no-untyped-def]
        return self.replies

    def time(self):  # type: ignore[no-untyped-def]
        return (int(time.time()) + 40, 0)


class _AsyncScripted(_Scripted):
    async def execute(self):  # type: ignore[no-untyped-def, override]
        return self.replies

    async def time(self):  # type: ignore[no-untyped-def, override]
        return (int(time.time()) + 40, 0)


def test_both_runners_send_the_same_commands_and_warn_alike(caplog):
    blocking, awaited = _Scripted([1, 0]), _AsyncScripted([1, 0])
    sync_wait = ReplicaWait(blocking, 1, 10)  # type: ignore[arg-type]
    async_wait = AsyncReplicaWait(awaited, 1, 10)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        sync_answers = [sync_wait("w") for _ in range(5)]

        async def five() -> list[bool]:
            return [await async_wait("w") for _ in range(5)]

        async_answers = asyncio.run(five())
    assert sync_answers == async_answers == [False] * 5
    assert blocking.sent == awaited.sent == [("INCR", MARK_KEY), ("WAIT", 1, 10)]  # then the back-off
    assert len([r for r in caplog.records if "replicas within" in r.message]) == 2  # one each


def test_both_clocks_read_the_same_time_from_the_same_reply():
    blocking = RedisClock(_Scripted([]))  # type: ignore[arg-type]
    awaited = AsyncRedisClock(_AsyncScripted([]))  # type: ignore[arg-type]
    assert blocking.time() == pytest.approx(asyncio.run(awaited.time()), abs=0.05)
    assert blocking.time() == pytest.approx(time.time() + 40, abs=1.0)
