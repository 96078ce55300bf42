"""Time limits in tests, derived from what the machine is doing now.

A test that waits for something, or bounds how late it may be, states the
time an idle machine needs; ``scaled`` stretches it by the machine's present
slowdown, the larger of:

- the run queue per core (the 1-minute load average over the core count):
  at a load of 12 on 2 cores a process gets about a sixth of a core;
- the stretch of a fixed CPU task: timed now, against the fastest this
  test session has seen.

Both are measured when ``scaled`` is called, so a test that starts while a
compile or another suite runs beside it gets the time that load needs; on an
idle machine the factor is 1 and the limit is the idle one. The factor is
capped (``MAX_SLOWDOWN``): a limit is still a limit, and a hang still fails.
"""

from __future__ import annotations

import os
import time

MAX_SLOWDOWN = 12.0
_PROBE_LOOPS = 20_000
_fastest: float | None = None


def _probe_seconds() -> float:
    started = time.perf_counter()
    total = 0
    for number in range(_PROBE_LOOPS):
        total += number * number
    return time.perf_counter() - started


def slowdown() -> float:
    """How much slower than idle this machine runs now (1 on an idle one)."""
    global _fastest
    took = min(_probe_seconds() for _ in range(3))
    _fastest = took if _fastest is None else min(_fastest, took)
    stretch = took / _fastest
    queue = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(MAX_SLOWDOWN, max(1.0, stretch, queue))


def scaled(seconds: float) -> float:
    """``seconds`` on an idle machine, stretched by the slowdown now."""
    return seconds * slowdown()
