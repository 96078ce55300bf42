"""The MCP tools at ``/mcp`` of ``ferret serve``, behind the same keys as the HTTP API.

The namespace is the key's (a key for exactly one namespace, checked by ``ferret.serve.gate``), never an
argument: a model cannot name another. The MCP SDK's streamable HTTP transport runs stateless, so each
request is served with its own key's namespace (a context variable set for the request, which the
transport's task for that request inherits)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from starlette.routing import Route

from ferret.producer.api import AsyncClient
from ferret.producer.mcp_server import MemoryTools, build_server
from ferret.serve.gate import App, Receive, Scope, Send

KEY_NAMESPACE: contextvars.ContextVar[str] = contextvars.ContextVar("ferret_key_namespace")


class KeyedTools(MemoryTools):
    """The MCP tools, each call in the namespace of the key that made it."""

    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self.client = client

    @property
    def namespace(self) -> str:  # type: ignore[override]
        return KEY_NAMESPACE.get()


class _WithKeyNamespace:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = scope["state"]["ferret_key"]  # the gate admitted the request with it
        token = KEY_NAMESPACE.set(key.namespaces[0])
        try:
            await self.app(scope, receive, send)
        finally:
            KEY_NAMESPACE.reset(token)


def mcp_endpoint(client: Callable[[], AsyncClient], host: str) -> tuple[Route, Any]:
    """The ``/mcp`` route and the session manager whose ``run()`` the app's lifespan enters."""
    server = build_server("the namespace your key reaches", client, KeyedTools(client))
    app = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    route = next(r for r in app.routes if isinstance(r, Route) and r.path == "/mcp")
    return Route("/mcp", endpoint=_WithKeyNamespace(route.endpoint), methods=["GET", "POST", "DELETE"]), \
        server.session_manager
