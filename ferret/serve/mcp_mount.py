"""The MCP tools at ``/mcp`` of ``ferret serve``, behind the same keys as the HTTP API.

The namespace is the key's (a key for exactly one namespace, checked by ``ferret.serve.gate``), never an
argument: a model cannot name another. Each tool asks ``ferret.serve.access`` whether the key may do what the
tool does (a read-only key cannot write or forget), as every route does. The MCP SDK's streamable HTTP
transport runs stateless, so each request is served with its own key (a context variable set for the
request, which the transport's task for that request inherits)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from starlette.routing import Route

from ferret.producer.api import AsyncClient
from ferret.producer.mcp_server import MemoryTools, build_server
from ferret.serve.access import Action, Refused, authorize
from ferret.serve.api_keys import ApiKey
from ferret.serve.gate import App, Receive, Scope, Send
from ferret.serve.http_metrics import HttpMetrics

CALLERS_KEY: contextvars.ContextVar[ApiKey] = contextvars.ContextVar("ferret_callers_key")


class KeyedTools(MemoryTools):
    """The MCP tools, each call in the namespace of the key that made it, and only if that key may."""

    def __init__(self, client: Callable[[], AsyncClient], metrics: HttpMetrics) -> None:
        self.client = client
        self.metrics = metrics

    @property
    def namespace(self) -> str:  # type: ignore[override]
        return CALLERS_KEY.get().namespaces[0]

    def authorize(self, action: Action) -> None:
        try:
            authorize(CALLERS_KEY.get(), self.namespace, action)
        except Refused as refused:
            self.metrics.refusals.labels(refused.reason).inc()
            raise ToolError(f"{refused.reason}: {refused.message}") from None


class _WithKeyNamespace:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = scope["state"]["ferret_key"]  # the gate admitted the request with it
        token = CALLERS_KEY.set(key)
        try:
            await self.app(scope, receive, send)
        finally:
            CALLERS_KEY.reset(token)


def mcp_endpoint(client: Callable[[], AsyncClient], host: str, metrics: HttpMetrics) -> tuple[Route, Any]:
    """The ``/mcp`` route and the session manager whose ``run()`` the app's lifespan enters."""
    server = build_server("the namespace your key reaches", client, KeyedTools(client, metrics))
    app = server.streamable_http_app(stateless_http=True, json_response=True, host=host)
    route = next(r for r in app.routes if isinstance(r, Route) and r.path == "/mcp")
    return Route("/mcp", endpoint=_WithKeyNamespace(route.endpoint), methods=["GET", "POST", "DELETE"]), \
        server.session_manager
