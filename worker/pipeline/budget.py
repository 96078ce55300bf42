"""The time a job has left, passed down to every stage."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Budget:
    """A deadline on the monotonic clock; ``None`` means no deadline."""

    deadline: float | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @classmethod
    def of_seconds(cls, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> Budget:
        return cls(None if seconds is None else clock() + seconds, clock)

    def remaining(self) -> float:
        if self.deadline is None:
            return math.inf
        return self.deadline - self.clock()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def has(self, seconds: float) -> bool:
        return self.remaining() > seconds

    def cap(self, seconds: float) -> float:
        """The smaller of ``seconds`` and what is left, never below zero."""
        return max(0.0, min(seconds, self.remaining()))

    def within(self, seconds: float) -> Budget:
        """A budget that ends at this one's deadline or ``seconds`` from now, whichever is first."""
        limit = self.clock() + seconds
        return Budget(limit if self.deadline is None else min(self.deadline, limit), self.clock)
