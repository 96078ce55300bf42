"""The producer's rules written once, without I/O: steps that ask for Redis.

A rule (enqueue a request, supersede a conversation's prefetch, read a
result...) is a generator: it yields the Redis operations it needs, one
round trip at a time, and receives their replies; it returns its answer.
It never touches a socket, so the blocking client (``ferret.steps_sync``)
and the asyncio client (``ferret.steps_async``) run the same rules, each
with its own I/O. A ``redis.ResponseError`` (WRONGTYPE...) is thrown back
into the rule, which decides what it means; any other error ends it.

Operations, each one round trip:

- ``Call``: one command (its reply parsed as redis-py parses it);
- ``Batch``: commands sent together (a MULTI/EXEC when ``transaction``);
- ``Eval``: a Lua script (EVALSHA, loaded on first use);
- ``Now``: Redis's clock (``ferret.redis_plumbing.clock``: a reading every 30 s, else none);
- ``Replicate``: wait until the writes so far are on enough replicas.

``on`` names the server: ``queue`` (queues, results, traces) or ``store``
(the memory store, which may be another Redis: ``ferret.redis_plumbing.store_conn``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Server = Literal["queue", "store"]


@dataclass(frozen=True)
class Call:
    args: tuple[Any, ...]
    on: Server = "queue"


@dataclass(frozen=True)
class Batch:
    calls: tuple[tuple[Any, ...], ...]
    transaction: bool = False
    on: Server = "queue"


@dataclass(frozen=True)
class Eval:
    source: str
    keys: tuple[Any, ...]
    args: tuple[Any, ...]
    on: Server = "queue"


@dataclass(frozen=True)
class Now:
    pass


@dataclass(frozen=True)
class Replicate:
    what: str


Op = Call | Batch | Eval | Now | Replicate
Step = Generator[Op, Any, T]


def text(raw: Any) -> str | None:
    """A reply as text (None stays None)."""
    if raw is None:
        return None
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def drive(rule: Generator[Any, Any, T], do: Callable[[Any], Any],
          thrown: tuple[type[BaseException], ...]) -> T:
    """Run ``rule`` to its answer with the blocking ``do`` for each thing it yields; an error of the ``thrown``
    kinds is thrown back into the rule, which decides what it means. (The asyncio runners have the same loop
    with ``await``.)"""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            asked = rule.throw(error) if error is not None else rule.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        reply, error = None, None
        try:
            reply = do(asked)
        except thrown as exc:
            error = exc
