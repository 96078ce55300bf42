"""Failed authentication, slowed down: past a rate of wrong keys for one key id, or from one client address,
the next attempts are refused (429) before any key is looked up, so guessing costs no Redis read.

Counted in this server's memory by ``limits``' moving windows: a guess is cheap to refuse, and a
server's own count needs no shared state (each server of several counts what it sees)."""

from __future__ import annotations

import math
import time

from limits import parse as parse_rate
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter


class FailedKeys:
    def __init__(self, per_key: str, per_address: str) -> None:
        self.limiter = MovingWindowRateLimiter(MemoryStorage())
        self.per_key, self.per_address = parse_rate(per_key), parse_rate(per_address)

    def _counted(self, key_id: str | None, address: str | None) -> list[tuple[object, str]]:
        found: list[tuple[object, str]] = []
        if key_id is not None:
            found.append((self.per_key, f"id:{key_id}"))
        if address is not None:
            found.append((self.per_address, f"address:{address}"))
        return found

    def retry_after(self, key_id: str | None, address: str | None) -> int | None:
        """None when an attempt for ``key_id`` from ``address`` may be checked; else the seconds to wait."""
        for item, name in self._counted(key_id, address):
            if not self.limiter.test(item, name):  # type: ignore[arg-type]
                reset = self.limiter.get_window_stats(item, name).reset_time  # type: ignore[arg-type]
                return max(1, math.ceil(reset - time.time()))
        return None

    def failed(self, key_id: str | None, address: str | None) -> None:
        for item, name in self._counted(key_id, address):
            self.limiter.hit(item, name)  # type: ignore[arg-type]
