"""Browsers' cross-origin calls (``http.cors_origins``), by Starlette's CORS middleware in front of the gate:
a preflight from a listed origin is answered before any key is asked for (a browser sends none with it), and
every answer to a listed origin, refusals too, carries the ``Access-Control-*`` headers a page needs to read
it. No origin listed (the default): no middleware, no such header."""

from __future__ import annotations

from starlette.middleware.cors import CORSMiddleware

from ferret.serve.gate import App

PREFLIGHT_CACHE_SECONDS = 600


def with_cors(app: App, origins: tuple[str, ...]) -> App:
    if not origins:
        return app
    return CORSMiddleware(app, allow_origins=list(origins),  # type: ignore[arg-type,return-value]  # ASGI apps
                          allow_methods=["GET", "POST"], allow_headers=["authorization", "content-type"],
                          expose_headers=["retry-after"], max_age=PREFLIGHT_CACHE_SECONDS)
