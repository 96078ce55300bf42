"""One log line for a known condition, then a count: a flood of the same thing (100,000 junk queue
entries, a Redis away for minutes) is a line per ``window`` seconds per kind, not a line per event.

The first event of a kind is logged as it comes; later ones within the window are counted, and the
next line of that kind (the first after the window) says how many were left unsaid since. The counts
are never lost from the metrics, which count every event; a worker that stops says what it held back
(``say_held_back``). Unknown conditions are not for this: they get one traceback each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

WINDOW_SECONDS = 10.0
_EVERY: list[RepeatedLines] = []


class RepeatedLines:
    def __init__(self, logger: logging.Logger, window: float = WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._said_at: dict[str, float] = {}
        self._held: dict[str, int] = {}
        _EVERY.append(self)

    def log(self, level: int, kind: str, message: str, *args: Any) -> bool:
        """Log ``message`` unless a line of ``kind`` went out less than a window ago (then count it);
        True when it was logged."""
        now = self._clock()
        with self._lock:
            said = self._said_at.get(kind)
            if said is not None and now - said < self._window:
                self._held[kind] = self._held.get(kind, 0) + 1
                return False
            held = self._held.pop(kind, 0)
            self._said_at[kind] = now
        if held and said is not None:
            message += " (and %d more like it in the last %.0f s, not logged)"
            args = (*args, held, now - said)
        self._logger.log(level, message, *args)
        return True

    def warning(self, kind: str, message: str, *args: Any) -> bool:
        return self.log(logging.WARNING, kind, message, *args)

    def say_held_back(self) -> None:
        """One line per kind with events counted and not yet said."""
        with self._lock:
            held, self._held = self._held, {}
        for kind, count in sorted(held.items()):
            self._logger.warning("%d more %s, not logged", count, kind)


def say_everything_held_back() -> None:
    """At a worker's stop: every kind's count not yet said, for every module's lines."""
    for lines in _EVERY:
        lines.say_held_back()
