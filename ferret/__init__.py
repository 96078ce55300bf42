"""Ferret: a retrieval-orchestration worker service.

``ferret.connect()`` is the Python client and ``ferret.connect_async()`` its
asyncio twin (``ferret.producer.api``), imported when called: importing ``ferret``
or any kernel module loads no producer, worker or RQ code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferret.producer.api import AsyncClient, Client

__version__ = "0.1.0"


def connect(*args: Any, **kwargs: Any) -> Client:
    """A client with the CLI's settings; see ``ferret.producer.api.connect``."""
    from ferret.producer.api import connect as connect_client  # the package's facade: the one import upward

    return connect_client(*args, **kwargs)


def connect_async(*args: Any, **kwargs: Any) -> AsyncClient:
    """An asyncio client with the CLI's settings; see ``ferret.producer.api.connect_async``."""
    from ferret.producer.api import connect_async as connect_async_client

    return connect_async_client(*args, **kwargs)
