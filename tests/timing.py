"""Time limits in tests, derived from what the machine is doing now.

A test that waits for something, or bounds how late it may be, states the
time an idle machine needs; ``scaled`` stretches it by the machine's present
slowdown, the larger of:

- the run queue per core (the 1-minute load average over the core count):
  at a load of 12 on 2 cores a process gets about a sixth of a core;
- the share of a core a CPU-bound probe gets now: its wall time over its
  CPU time (about 30 ms of work; 2.5 when five busy processes share two
  cores). Unlike the load average, which takes a minute to rise, this
  sees a load that began a moment ago.

Both are measured when ``scaled`` is called, so a test that starts while a
compile or another suite runs beside it gets the time that load needs; on an
idle machine the factor is 1 and the limit is the idle one. The factor is
capped (``MAX_SLOWDOWN``): a limit is still a limit, and a hang still fails.
"""

from __future__ import annotations

import os
import time

MAX_SLOWDOWN = 12.0
PROBE_CPU_SECONDS = 0.03


def _probe_stretch() -> float:
    """Wall time over CPU time of a CPU-bound loop run for ``PROBE_CPU_SECONDS`` of CPU."""
    wall, cpu = time.perf_counter(), time.thread_time()
    total = 0
    while time.thread_time() - cpu < PROBE_CPU_SECONDS:
        for number in range(2_000):
            total += number * number
    return (time.perf_counter() - wall) / max(1e-6, time.thread_time() - cpu)


def slowdown() -> float:
    """How much slower than idle this machine runs now (1 on an idle one)."""
    queue = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(MAX_SLOWDOWN, max(1.0, _probe_stretch(), queue))


def scaled(seconds: float) -> float:
    """``seconds`` on an idle machine, stretched by the slowdown now."""
    return seconds * slowdown()
