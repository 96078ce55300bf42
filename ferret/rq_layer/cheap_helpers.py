"""Two of RQ's helpers that a worker calls several times a job, made cheap in a Ferret worker's process.

- ``utcparse``: RQ reads every stamp of a job hash (created, enqueued, started, ended, last heart-beat)
  with ``datetime.strptime``, ~12 us each. A stamp in RQ's own format (``2026-11-27T07:47:26.485497Z``,
  what RQ and Ferret write) is read here by a pattern and ``datetime``'s constructor, ~1.5 us, to the same
  value; anything else (an older format, garbage from an untrusted hash) goes to RQ's own parser, which
  answers or raises as before.
- ``resolve_serializer``: RQ resolves the serializer afresh for every job, queue, registry and result it
  builds, each time checking it against a ``typing.Protocol`` (Python 3.11's check walks the protocol's
  members: ~9 us). The answer for a given serializer never changes, so it is kept.

Like ``clock.use_clock``, ``use_cheap_helpers`` replaces the functions in every RQ module that holds them
(``rq_modules.replace_in_rq``), and only a Ferret worker calls it, at start-up: an application's own process
keeps RQ as it is.
"""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import Callable
from typing import Any

import rq.serializers
import rq.utils

from ferret.rq_layer.rq_modules import replace_in_rq

_RQ_UTCPARSE: Callable[[str], datetime.datetime] = rq.utils.utcparse
_RQ_RESOLVE: Callable[..., Any] = rq.serializers.resolve_serializer
_RQ_STAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})\.([0-9]{6})Z\Z")
_RESOLVED: dict[Any, Any] = {}


def utcparse(string: str) -> datetime.datetime:
    """RQ's ``utcparse``: the same datetime (UTC) for the same string, and the same ``ValueError`` kind."""
    matched = _RQ_STAMP.match(string) if isinstance(string, str) else None
    if matched is None:
        return _RQ_UTCPARSE(string)
    year, month, day, hour, minute, second, micro = map(int, matched.groups())
    return datetime.datetime(year, month, day, hour, minute, second, micro, tzinfo=datetime.UTC)


def resolve_serializer(serializer: Any = None) -> Any:
    """RQ's ``resolve_serializer``, its answer kept per serializer (an unhashable one is resolved each time)."""
    try:
        return _RESOLVED[serializer]
    except (KeyError, TypeError):
        pass
    resolved = _RQ_RESOLVE(serializer)
    with contextlib.suppress(TypeError):  # unhashable: not kept
        _RESOLVED[serializer] = resolved
    return resolved


def use_cheap_helpers() -> None:
    """Every RQ module that holds RQ's ``utcparse`` or ``resolve_serializer`` gets this module's."""
    replace_in_rq("utcparse", {_RQ_UTCPARSE: utcparse})
    replace_in_rq("resolve_serializer", {_RQ_RESOLVE: resolve_serializer})
