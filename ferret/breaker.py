"""A circuit breaker per outside endpoint (a chat model, an embeddings
endpoint, a Nous server), shared by every worker through Redis.

``failures`` failures in a row (unreachable, timed out, or a 5xx answer)
open the circuit for ``cooldown_seconds``: meanwhile every worker skips
the call at once (``CircuitOpen``) instead of spending a job's seconds on
an endpoint that will not answer. After the cool-down, calls go through
again on probation: the first failure opens the circuit again at once, the
first success closes it.

The state is three keys per endpoint whose lifetimes Redis keeps, so no
host's clock is read and clocks that drift between hosts do not matter:
``open`` (exists while open, ``PX`` the cool-down), ``probation`` (exists
from the opening until a cool-down and a window later) and ``failures``
(a counter that lives ``window_seconds`` from its first failure). One Lua
script counts a failure and opens the circuit, atomically.

What it costs a healthy endpoint: nothing per call but a look at the
``open`` and ``probation`` keys (one round trip) at most every
``refresh_seconds`` per process and endpoint
(what another worker opened is seen within that time; what this process
opened, at once), and one ``DEL`` after a success only when this process
counted a failure or saw the circuit open or on probation lately (a
success is what ends a run of failures; one that follows none has nothing
to reset).

Why not pybreaker's ``CircuitRedisStorage``: it reads the state from Redis
on every call and writes the counter on every success (two round trips a
call), stamps ``opened_at`` with the host's clock and compares it with
another host's, and counts and opens in separate commands. If Redis cannot
be reached the breaker says "closed": the endpoint is tried as if there were
no breaker.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass

import redis

from ferret import keys

logger = logging.getLogger(__name__)

_FAILED = """
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.call('PTTL', KEYS[2]) end
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if count >= tonumber(ARGV[1]) or redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])
  redis.call('SET', KEYS[3], '1', 'PX', tonumber(ARGV[3]) + tonumber(ARGV[2]))
  redis.call('DEL', KEYS[1])
  return -tonumber(ARGV[3])
end
return 0
"""


class CircuitOpen(Exception):
    """The endpoint's circuit is open: the call was not made."""

    def __init__(self, endpoint: str, seconds_left: float) -> None:
        super().__init__(f"{endpoint} is failing: calls skipped for {seconds_left:.1f} s more (circuit open)")
        self.endpoint = endpoint
        self.seconds_left = seconds_left


@dataclass(frozen=True)
class BreakerRules:
    failures: int = 5
    window_seconds: float = 30.0
    cooldown_seconds: float = 10.0
    refresh_seconds: float = 0.5


class Breaker:
    """One endpoint's circuit, as this process sees and changes it."""

    def __init__(self, client: redis.Redis, endpoint: str, rules: BreakerRules) -> None:
        self.client = client
        self.endpoint = endpoint
        self.rules = rules
        digest = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self._keys = [keys.breaker(digest, "failures"), keys.breaker(digest, "open"), keys.breaker(digest, "probation")]
        self._failed = client.register_script(_FAILED)
        self._lock = threading.Lock()
        self._open_until = 0.0  # monotonic
        self._checked_at = float("-inf")
        self._reset_due_until = 0.0  # a success before this time clears the failures and probation
        self.skipped = 0
        self.opened = 0

    def check(self) -> None:
        """Raise ``CircuitOpen`` when the circuit is open; else return (the call may go)."""
        now = time.monotonic()
        with self._lock:
            if now < self._open_until:
                self.skipped += 1
                raise CircuitOpen(self.endpoint, self._open_until - now)
            if now - self._checked_at < self.rules.refresh_seconds:
                return
            self._checked_at = now
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.pttl(self._keys[1])
                pipe.exists(self._keys[2])
                left_ms, on_probation = (int(answer) for answer in pipe.execute())
        except redis.RedisError as exc:
            logger.debug("breaker %s: Redis unreachable (%s); taken as closed", self.endpoint, exc)
            return
        if on_probation:  # the success that ends it may be this process's
            with self._lock:
                self._reset_due_until = max(self._reset_due_until, now + self.rules.window_seconds)
        if left_ms > 0:
            self._note_open(now, left_ms)
            with self._lock:
                self.skipped += 1
            raise CircuitOpen(self.endpoint, left_ms / 1000)

    def failed(self) -> None:
        """Count one failure of a call that was made (it may open the circuit)."""
        now = time.monotonic()
        rules = self.rules
        try:
            answer = int(self._failed(keys=self._keys, args=[
                rules.failures, int(rules.window_seconds * 1000), int(rules.cooldown_seconds * 1000),
                self.endpoint]))
        except redis.RedisError as exc:
            logger.debug("breaker %s: Redis unreachable (%s); failure not counted", self.endpoint, exc)
            return
        with self._lock:
            self._reset_due_until = max(self._reset_due_until, now + rules.window_seconds)
        if answer < 0:
            with self._lock:
                self.opened += 1
            logger.warning("%s failed repeatedly: circuit open, calls skipped for %.1f s", self.endpoint,
                           -answer / 1000)
            self._note_open(now, -answer)
        elif answer > 0:
            self._note_open(now, answer)

    def succeeded(self) -> None:
        """A call was answered: a run of failures (and a probation) ends."""
        with self._lock:
            if time.monotonic() >= self._reset_due_until:
                return
            self._reset_due_until = 0.0
        try:
            self.client.delete(self._keys[0], self._keys[2])
        except redis.RedisError as exc:
            logger.debug("breaker %s: Redis unreachable (%s)", self.endpoint, exc)

    def is_open(self) -> bool:
        """Whether the circuit is open now, as Redis says (for metrics: one round trip)."""
        try:
            return int(self.client.pttl(self._keys[1])) > 0
        except redis.RedisError:
            return False

    def _note_open(self, now: float, left_ms: int) -> None:
        with self._lock:
            self._open_until = now + left_ms / 1000
            # a success after the cool-down must end the probation this opening began
            self._reset_due_until = max(self._reset_due_until,
                                        self._open_until + self.rules.window_seconds)
