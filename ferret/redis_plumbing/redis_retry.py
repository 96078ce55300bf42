"""How Ferret's Redis clients ride out trouble on the Redis side.

- A connection fault (Redis restarting, a dropped socket) is retried with
  exponential backoff for about ten seconds, then raised.
- Redis out of memory (``maxmemory`` with ``noeviction``) refuses a write
  before running it, so the same command is safe to send again: it is
  retried with backoff until Redis has room, however long that takes. A
  worker or a batch producer waits instead of crashing; ``ferret batch``
  finishes by itself when memory comes back. Each episode is logged once
  when it starts and once when it ends, per client.

A watched transaction (``WATCH``) is not resent blindly: as for a dropped
connection, redis-py raises ``WatchError`` and the caller retries it whole.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from redis.backoff import AbstractBackoff, ExponentialBackoff
from redis.exceptions import ConnectionError, OutOfMemoryError, ResponseError, TimeoutError
from redis.retry import Retry

logger = logging.getLogger(__name__)

T = TypeVar("T")

RECONNECT_ATTEMPTS = 8  # 0.05 s doubling to 2 s: about 10 s in all
RECONNECT_SECONDS = 10  # (what a user is told the wait is)
OUT_OF_MEMORY_PAUSE_CAP_SECONDS = 1.0


def is_out_of_memory(error: ResponseError) -> bool:
    """Redis refused a write for want of memory. Redis 7 says ``OOM ...``
    (redis-py's ``OutOfMemoryError``); Redis 6 wraps it when a script's write
    is refused (``Error running script ... -OOM command not allowed``)."""
    return isinstance(error, OutOfMemoryError) or "OOM command not allowed" in str(error)


class _Episode:
    """Whether Redis is out of memory as this client last saw it (for logging once)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.since: float | None = None
        self.lock = threading.Lock()

    def full(self) -> None:
        with self.lock:
            if self.since is not None:
                return
            self.since = time.monotonic()
        logger.warning("Redis at %s is out of memory (maxmemory); waiting for room and retrying", self.where)

    def room(self) -> None:
        with self.lock:
            if self.since is None:
                return
            waited, self.since = time.monotonic() - self.since, None
        logger.warning("Redis at %s has room again after %.1f s; carrying on", self.where, waited)


class PatientRetry(Retry):
    """redis-py's ``Retry`` for connection faults, and no limit for out-of-memory refusals."""

    def __init__(self, where: str, backoff: AbstractBackoff | None = None,
                 retries: int = RECONNECT_ATTEMPTS, episode: _Episode | None = None) -> None:
        super().__init__(backoff or ExponentialBackoff(cap=2.0, base=0.05), retries,
                         (ConnectionError, TimeoutError, ResponseError))
        self._episode = episode or _Episode(where)

    def __deepcopy__(self, memo: dict[int, Any]) -> PatientRetry:
        """redis-py copies the retry into every connection: they share one episode."""
        return PatientRetry(self._episode.where, copy.deepcopy(self._backoff, memo), self._retries, self._episode)

    def call_with_retry(self, do: Callable[[], T], fail: Callable[..., Any],
                        is_retryable: Callable[[Exception], bool] | None = None,
                        with_failure_count: bool = False) -> T:
        self._backoff.reset()
        failures = refusals = 0
        while True:
            try:
                answer = do()
            except ResponseError as error:
                if not is_out_of_memory(error):
                    raise
                refusals += 1
                self._episode.full()
                _call_fail(fail, error, 1, with_failure_count)  # raises WatchError inside a WATCH
                _pause_for_room(refusals)
                continue
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                _call_fail(fail, error, failures, with_failure_count)
                if 0 <= self._retries < failures:
                    raise
                pause = self._backoff.compute(failures)
                if pause > 0:
                    time.sleep(pause)
                continue
            if refusals:
                self.has_room()
            return answer

    def wait_for_room(self, refusals: int) -> None:
        """A write refused for want of memory, the ``refusals``-th in a row: said once for the episode (shared
        by every connection of the client), then a pause, doubling from 0.1 s to a second. For a caller
        that reads refusals as replies (a pipeline's ``raise_on_error=False``) and sends those writes again."""
        self._episode.full()
        _pause_for_room(refusals)

    def has_room(self) -> None:
        """Redis took the writes again: said once, if it had refused them."""
        self._episode.room()


def _pause_for_room(refusals: int) -> None:
    """The pause after the ``refusals``-th refusal in a row for want of memory: 0.1 s doubling to a second."""
    time.sleep(min(OUT_OF_MEMORY_PAUSE_CAP_SECONDS, 0.05 * 2 ** min(refusals, 8)))


def _call_fail(fail: Callable[..., Any], error: Exception, failures: int, with_failure_count: bool) -> None:
    if with_failure_count:
        fail(error, failures)
    else:
        fail(error)
