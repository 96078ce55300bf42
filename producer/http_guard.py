"""Serving HTTP without keeping sockets nobody uses: uvicorn's HTTP/1.1 protocol with a deadline on a
request's head. uvicorn closes a kept-alive connection that stays idle (``timeout_keep_alive``), but a
connection that sends a request's head slowly, or nothing at all (a slow-loris client), is kept for ever.
The guarded protocols close one that has not sent a whole request head ``HEAD_SECONDS`` after it
connected or started its next request; a request whose head came in time is not limited (its handler's
own deadlines apply). ``serve`` runs an ASGI app with one: uvicorn's httptools protocol (llhttp, in C) when
``httptools`` is installed, as the serve extra installs it, else its pure-Python h11 one; and uvloop's event
loop when installed (uvicorn's own choice)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is not installed
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

HEAD_SECONDS = 10.0  # a request's head (request line and headers) must arrive within this
IDLE_SECONDS = 5.0  # a kept-alive connection with no next request is closed after this (uvicorn's)


class _HeadGuard(asyncio.Protocol):
    """The deadline on a request's head, for either of uvicorn's HTTP/1.1 protocols (both keep the request's
    ``cycle``, whose ``response_complete`` says the connection is between requests)."""

    head_seconds = HEAD_SECONDS
    on_closed_slow: Callable[[], None] | None = None  # told of each connection closed for a slow head
    cycle: Any  # the protocol's (uvicorn's), as are these two
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm()

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_seconds, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def data_received(self, data: bytes) -> None:
        if self._between_requests():
            self._arm()  # a request's head is starting: it has head_seconds to arrive
        super().data_received(data)
        if not self._between_requests():
            self._disarm()  # the head came: the request is the handler's now

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.close()
            if self.on_closed_slow is not None:
                self.on_closed_slow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


class GuardedH11Protocol(_HeadGuard, H11Protocol):
    pass


GuardedHttpToolsProtocol = (type("GuardedHttpToolsProtocol", (_HeadGuard, HttpToolsProtocol), {})
                            if HttpToolsProtocol is not None else None)


def serve(app: Any, host: str, port: int, head_seconds: float = HEAD_SECONDS, log_level: str = "warning",
          idle_seconds: float = IDLE_SECONDS, on_closed_slow: Callable[[], None] | None = None,
          **options: Any) -> None:
    """Run ``app`` on uvicorn with ``GuardedH11Protocol`` (``head_seconds`` for a request's head). uvicorn's
    access log stays off: a URL is never logged (a key pasted into one would be)."""
    base = GuardedHttpToolsProtocol or GuardedH11Protocol
    protocol = type("Guarded", (base,), {"head_seconds": head_seconds,
                                                      "on_closed_slow": staticmethod(on_closed_slow) if on_closed_slow
                                                      else None})
    config = uvicorn.Config(app, host=host, port=port, http=protocol, timeout_keep_alive=max(1, round(idle_seconds)),
                            log_level=log_level, access_log=False, **options)
    uvicorn.Server(config).run()
