"""Ferret: a retrieval-orchestration worker service.

``ferret.connect()`` is the Python client and ``ferret.connect_async()`` its
asyncio twin (``ferret.producer.api``), imported when called: importing ``ferret``
or any kernel module loads no producer, worker or RQ code.

The public surface is ``__all__``: the two ways in, the clients, what they take
and give back (a memory, filters, a job's handle, a result and its items, a
conversation's context) and the errors a caller catches. The names are loaded
when first used. Everything else is internal and may change.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferret.contract import ResultItem, RetrievalResult, Timestamps
    from ferret.errors import (
        FerretError,
        ForeignResult,
        InvalidMemory,
        InvalidRequest,
        JobNotFound,
        RedisUnreachable,
        RequestIdTaken,
        ResultTimeout,
    )
    from ferret.producer.api import AsyncClient, Client
    from ferret.producer.conversations import ConversationContext
    from ferret.producer.rules import JobHandle
    from ferret.records import Filters, Memory, TimeRange

__version__ = "0.1.0"

_WHERE = {
    "Client": "ferret.producer.api", "AsyncClient": "ferret.producer.api",
    "Memory": "ferret.records", "Filters": "ferret.records", "TimeRange": "ferret.records",
    "JobHandle": "ferret.producer.rules", "ConversationContext": "ferret.producer.conversations",
    "RetrievalResult": "ferret.contract", "ResultItem": "ferret.contract", "Timestamps": "ferret.contract",
    **{name: "ferret.errors" for name in ("FerretError", "InvalidRequest", "InvalidMemory", "RequestIdTaken",
                                          "RedisUnreachable", "ResultTimeout", "JobNotFound", "ForeignResult")},
}

__all__ = [
    "AsyncClient",
    "Client",
    "ConversationContext",
    "FerretError",
    "Filters",
    "ForeignResult",
    "InvalidMemory",
    "InvalidRequest",
    "JobHandle",
    "JobNotFound",
    "Memory",
    "RedisUnreachable",
    "RequestIdTaken",
    "ResultItem",
    "ResultTimeout",
    "RetrievalResult",
    "TimeRange",
    "Timestamps",
    "__version__",
    "connect",
    "connect_async",
]

# What the clients offer (both the same names; the asyncio client's are coroutines). Their other methods are
# internal.
CLIENT_METHODS = ("enqueue", "query", "wait", "prefetch", "context_for", "result", "status", "trace", "remember",
                  "forget", "close")


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'ferret' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


def connect(*args: Any, **kwargs: Any) -> Client:
    """A client with the CLI's settings; see ``ferret.producer.api.connect``."""
    from ferret.producer.api import connect as connect_client  # the package's facade: the one import upward

    return connect_client(*args, **kwargs)


def connect_async(*args: Any, **kwargs: Any) -> AsyncClient:
    """An asyncio client with the CLI's settings; see ``ferret.producer.api.connect_async``."""
    from ferret.producer.api import connect_async as connect_async_client

    return connect_async_client(*args, **kwargs)
