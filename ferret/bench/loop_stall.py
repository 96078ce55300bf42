"""How long an event loop went without running a ready task: a ticker asks to wake every
millisecond and notes how late it woke (wall time), the thread's CPU time in that gap, and
the part of the gap CPython's cyclic garbage collector took (``gc.callbacks``): a full
collection walks every live object of the process, so its pauses grow with the heap the
application holds, whatever the client does."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

TICK_SECONDS = 0.001


class StallMeter:
    def __init__(self) -> None:
        self.stall = self.cpu = self.net_of_gc = self.longest_gc = 0.0
        self._gc_total = 0.0
        self._gc_started = 0.0
        self._done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _on_gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            took = time.perf_counter() - self._gc_started
            self._gc_total += took
            self.longest_gc = max(self.longest_gc, took)

    async def _tick(self) -> None:
        while not self._done.is_set():
            before, cpu, collected = time.perf_counter(), time.thread_time(), self._gc_total
            await asyncio.sleep(TICK_SECONDS)
            late = time.perf_counter() - before - TICK_SECONDS
            self.stall = max(self.stall, late)
            self.cpu = max(self.cpu, time.thread_time() - cpu)
            self.net_of_gc = max(self.net_of_gc, late - (self._gc_total - collected))

    def start(self) -> StallMeter:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    async def stop(self) -> dict[str, float]:
        self._done.set()
        if self._task is not None:
            await self._task
        gc.callbacks.remove(self._on_gc)
        return {"stall_ms": round(self.stall * 1000, 1), "stall_cpu_ms": round(self.cpu * 1000, 1),
                "stall_net_of_gc_ms": round(self.net_of_gc * 1000, 1),
                "longest_gc_pause_ms": round(self.longest_gc * 1000, 1)}
