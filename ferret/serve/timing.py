"""Every HTTP answer counted and timed by its route's template (``ferret.serve.http_metrics``)."""

from __future__ import annotations

import time
from typing import Any

from starlette.routing import Match

from ferret.serve.gate import App, Message, Receive, Scope, Send
from ferret.serve.http_metrics import HttpMetrics


class Timing:
    def __init__(self, app: App, routes: list[Any], metrics: HttpMetrics) -> None:
        self.app = app
        self.routes = routes
        self.metrics = metrics

    def _template(self, scope: Scope) -> str:
        routed = scope.get("route")  # FastAPI leaves the route it ran in the scope
        if routed is not None and getattr(routed, "path", None):
            return str(routed.path)
        for route in self.routes:
            matched, _ = route.matches(scope)
            if matched is Match.FULL:
                return str(getattr(route, "path", "other"))
        return "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, sending)
        finally:
            route = self._template(scope)
            self.metrics.requests.labels(route, scope["method"], str(status[0])).inc()
            self.metrics.seconds.labels(route).observe(time.perf_counter() - started)
