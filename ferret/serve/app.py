"""``ferret serve``'s ASGI application: FastAPI routes (``ferret.serve.routes``), the MCP tools at ``/mcp``,
health, readiness and metrics, behind the gate (``ferret.serve.gate``) and timed (``ferret.serve.timing``).

FastAPI because the API's documents come from the models Ferret already validates with: the OpenAPI
document at ``/openapi.json`` is generated from them, and the JavaScript client's types from it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ferret.producer.api import AsyncClient
from ferret.serve import errors_http
from ferret.serve.access import undeclared
from ferret.serve.cors import with_cors
from ferret.serve.gate import Gate
from ferret.serve.http_metrics import HttpMetrics
from ferret.serve.routes import router
from ferret.serve.strict_document import tighten
from ferret.serve.timing import Timing
from ferret.settings import LimitSettings, Settings

API_VERSION = "1"


def build_app(settings: Settings, ferret: AsyncClient, *, mcp: bool = True, host: str = "127.0.0.1") -> Any:
    """The whole server; ``ferret`` is the one client every request shares (closed at shutdown)."""
    metrics = HttpMetrics()
    mcp_route, mcp_sessions = (None, None)
    if mcp:
        from ferret.serve.mcp_mount import mcp_endpoint

        mcp_route, mcp_sessions = mcp_endpoint(lambda: ferret, host, metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if mcp_sessions is not None:
                await stack.enter_async_context(mcp_sessions.run())
            try:
                yield
            finally:
                await ferret.close()

    api = _api(lifespan, settings.limits)
    api.state.ferret = ferret
    api.state.http = settings.http
    api.state.metrics = metrics
    if mcp_route is not None:
        api.router.routes.append(mcp_route)

    @api.get("/metrics", include_in_schema=False)
    async def scrape() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    versioned = [r for r in router.routes if isinstance(r, APIRoute)]  # the /v1 routes (their paths prefixed)
    missing = undeclared(r.endpoint for r in versioned) + [r.path for r in versioned if "{namespace}" not in r.path]
    if missing:
        raise RuntimeError(f"routes that declare no action or namespace (ferret.serve.access): {missing}")
    gated = Gate(api, versioned, ferret.client, settings.http, metrics)  # type: ignore[arg-type]  # an ASGI app
    timed = Timing(with_cors(gated, settings.http.cors_origins), api.router.routes, metrics)
    timed.metrics = metrics
    return timed


def openapi_document(limits: LimitSettings | None = None) -> dict[str, Any]:
    """The API's OpenAPI document, as a server with ``limits`` (the defaults: none given) serves it at
    /openapi.json (no Redis needed)."""
    return _api(None, limits or LimitSettings()).openapi()


def _api(lifespan: Any, limits: LimitSettings) -> FastAPI:
    """The routes, their models and their errors; the document as strict as the server (``limits``)."""
    api = FastAPI(title="Ferret", version=API_VERSION, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Multi-pass memory retrieval for agents. Every /v1 route needs "
                              "`Authorization: Bearer KEY` (`ferret keys create`); a key reaches only its "
                              "namespaces.")
    errors_http.install(api)
    api.include_router(router)

    @api.get("/healthz", summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz", summary="Redis answers: requests can be served",
             responses={503: {"description": "Redis does not answer."}})
    async def readyz(request: Request) -> Response:
        try:
            await request.app.state.ferret.client.ping()
        except Exception as exc:  # any failure means not ready; the reason is said
            return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, status_code=503)
        return JSONResponse({"status": "ready"})

    plain_openapi = api.openapi

    def with_keys() -> dict[str, Any]:
        """FastAPI's document, as strict as the server, with the bearer key every /v1 route needs."""
        if api.openapi_schema is None:
            document = tighten(plain_openapi(), limits)
            document.setdefault("components", {})["securitySchemes"] = {
                "key": {"type": "http", "scheme": "bearer", "description": "A key from `ferret keys create`."}}
            for path, operations in document["paths"].items():
                if path.startswith("/v1/"):
                    for operation in operations.values():
                        operation["security"] = [{"key": []}]
            api.openapi_schema = document
        return api.openapi_schema

    api.openapi = with_keys  # type: ignore[method-assign]
    return api
