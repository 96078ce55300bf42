"""Python's cyclic garbage collector, paced for a worker process.

A worker's heap is mostly what it keeps: its modules, RQ, and each namespace's index and held memories (a
10,000-memory namespace held whole is ~100,000 objects, sets of tokens among them). Its jobs make next to
no cyclic garbage (2,000 batch jobs: the young generations' 805 passes collected no object, the 5 full ones
10), yet each full collection walks the whole heap: 25-35 ms of CPU for such a namespace's worker called
directly, up to 7-20 ms for the automatic ones of a draining worker (a few per 2,000 jobs), inside whichever
job's allocations set them off. The walks cost every job (~0.045 ms a job), and the job one lands in waits
for it.

So the long-lived heap is frozen (``gc.freeze``: out of the collector's walks; reference counting still
frees what dies, as for any object):

- at start-up, after one collection (``freeze_start_up``): modules, RQ, the worker's own objects;
- between two jobs, after a full collection that took more than ``SLOW_FULL_COLLECTION_SECONDS`` of CPU
  (something large came to stay since: a namespace's index, its memories): the heap is collected, then
  frozen, so the next full collections walk only what came after;
- and, with a freeze in place, every ``THAW_SECONDS`` between two jobs, the frozen heap is thawed, collected
  and frozen again: a frozen object that has since become cyclic garbage (an evicted namespace's objects
  in a reference cycle) is freed then, so a freeze keeps garbage no longer than that.

Each of the two costs one walk of the whole heap, between jobs. Nothing else changes: the collector still
runs on what is not frozen, at its own thresholds.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

SLOW_FULL_COLLECTION_SECONDS = 0.005
THAW_SECONDS = 600.0


class GcPacing:
    """The pacing of one process's collector; ``install`` it, call ``between_jobs`` between two jobs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, cpu: Callable[[], float] = time.thread_time,
                 collector: Any = gc) -> None:
        """``cpu``: the collecting thread's own CPU (the search threads' work beside it is not the walk's)."""
        self._clock, self._cpu, self._gc = clock, cpu, collector
        self._began: float | None = None
        self.freeze_due = False
        self.frozen_at: float | None = None  # when the heap was last frozen (None: not yet)
        self.freezes = 0

    def install(self) -> None:
        if self._watch not in self._gc.callbacks:
            self._gc.callbacks.append(self._watch)

    def uninstall(self) -> None:
        if self._watch in self._gc.callbacks:
            self._gc.callbacks.remove(self._watch)

    def _watch(self, phase: str, info: dict[str, Any]) -> None:
        """The collector's callback: times its full collections (a clock read at each end of those only)."""
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._began = self._cpu()
        elif self._began is not None:
            if self._cpu() - self._began > SLOW_FULL_COLLECTION_SECONDS:
                self.freeze_due = True
            self._began = None

    def freeze(self) -> None:
        """Collect everything not frozen, then freeze what is left."""
        self._gc.collect()
        self._gc.freeze()
        self.frozen_at = self._clock()
        self.freeze_due = False
        self.freezes += 1

    def between_jobs(self) -> None:
        """Freeze when a slow full collection said the heap grew; thaw and freeze again when it is time."""
        thaw = self.frozen_at is not None and self._clock() - self.frozen_at >= THAW_SECONDS
        if not (self.freeze_due or thaw):
            return
        began = self._cpu()
        if thaw:
            self._gc.unfreeze()
        self.freeze()
        logger.debug("collector: heap %s (%d objects frozen) in %.1f ms", "thawed and frozen" if thaw else "frozen",
                     self._gc.get_freeze_count(), (self._cpu() - began) * 1000)


PACING = GcPacing()  # the process's (a forked work horse inherits it; its parent's loop calls it)


def freeze_start_up() -> None:
    """The start-up objects frozen, and the pacing installed: once per worker process, before its loop."""
    PACING.install()
    PACING.freeze()


def between_jobs() -> None:
    """Never raises: a failure here costs the pacing, not the worker."""
    try:
        PACING.between_jobs()
    except Exception:
        logger.exception("collector pacing failed")
