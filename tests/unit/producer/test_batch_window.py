"""The in-flight window of a batch (``ferret.producer.batch_window``), on an injected clock: the lines a
batch keeps in flight follow what the workers drain, so the lines waiting fit in a share of their deadline."""

from __future__ import annotations

from ferret.producer.batch_window import CEILING, FLOOR, LEAST, MAX_QUEUE_SECONDS, InFlightWindow, queue_seconds_for


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _drain(window: InFlightWindow, clock: _Clock, per_second: int, seconds: int) -> None:
    for _ in range(seconds * 10):
        clock.now += 0.1
        window.drained(per_second // 10)


def test_before_any_result_the_window_is_the_floor():
    window = InFlightWindow(queue_seconds=30, clock=_Clock())
    assert window.size() == FLOOR
    assert window.room(in_flight=FLOOR - 10) == 10 and window.room(in_flight=FLOOR + 10) == 0


def test_the_window_is_the_drain_rate_times_the_queue_time():
    clock = _Clock()
    window = InFlightWindow(queue_seconds=30, clock=clock)
    _drain(window, clock, per_second=100, seconds=20)
    assert 2_900 <= window.size() <= 3_000  # 100 lines/s for 30 s: a line enqueued now waits about 30 s


def test_a_pool_that_slows_down_narrows_it_and_a_stalled_one_keeps_the_least():
    clock = _Clock()
    window = InFlightWindow(queue_seconds=10, clock=clock)
    _drain(window, clock, per_second=500, seconds=20)
    assert window.size() >= 4_900
    _drain(window, clock, per_second=50, seconds=20)  # the workers slowed (a worker lost, a busy machine)
    assert 490 <= window.size() <= 510  # 50 lines/s for 10 s (give or take the sample on the edge)
    clock.now += 60  # nothing drained for a minute
    assert window.size() == LEAST


def test_the_ceiling_bounds_the_producers_memory_and_the_queue_time_follows_the_deadline():
    clock = _Clock()
    window = InFlightWindow(queue_seconds=MAX_QUEUE_SECONDS, clock=clock)
    _drain(window, clock, per_second=100_000, seconds=12)
    assert window.size() == CEILING
    assert queue_seconds_for(600) == MAX_QUEUE_SECONDS  # the default batch deadline: at most 30 s queued
    assert queue_seconds_for(20) == 5  # a quarter of a short deadline
    assert queue_seconds_for(0.5) == 1
