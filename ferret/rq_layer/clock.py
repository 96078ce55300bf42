"""RQ's own timestamps, on Redis's clock.

RQ stamps what it writes with the host's clock (``rq.utils.now``): a job's
created, enqueued, started and ended times, its heartbeats, and the scores
of its registries (a started job's expiry, how long a finished or failed job
is listed, a scheduled job's time), which other hosts' workers then compare
with their own clocks. RQ has no setting for its clock, so ``use_clock``
points RQ's ``now`` (and with it ``current_timestamp``, which reads it) at
the process's ``ferret.redis_plumbing.clock`` clock: every RQ module that imported it gets
the clock's version. Only a Ferret worker process calls it, at start-up (the
process is Ferret's own); a second call moves RQ to that clock. A producer or
a client never does: an application that uses RQ for its own jobs keeps RQ's
clock, and Ferret's jobs carry Redis's time in their enqueue stamps instead
(``producer_side.EnqueueCommands``).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import rq.utils

from ferret.redis_plumbing.clock import Clock
from ferret.rq_layer.rq_modules import replace_in_rq

_HOST_NOW: Callable[[], datetime.datetime] = rq.utils.now
_current: list[Callable[[], datetime.datetime]] = [_HOST_NOW]  # what RQ's modules hold now


def use_clock(clock: Clock) -> None:
    """From now on RQ's ``now()`` in this process reads ``clock``: its last reading of Redis's clock when
    it has one (``last()``: no round trip, so RQ's signal handler, which asks for the time, never waits on
    Redis; the job path reads Redis's clock afresh every 30 s), else its ``time()``."""
    read = getattr(clock, "last", clock.time)

    def now() -> datetime.datetime:
        return datetime.datetime.fromtimestamp(read(), tz=datetime.UTC)

    # Every RQ module holds the host's now or the current one (a module imported since the last
    # call took rq.utils.now, the current one), so only those two are replaced, and no earlier
    # clock (and the Redis client in it) is kept alive.
    replace_in_rq("now", {_HOST_NOW: now, _current[0]: now})
    _current[0] = now


def rq_now() -> datetime.datetime:
    """What RQ takes for now, in this process."""
    return rq.utils.now()
