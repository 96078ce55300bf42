"""What every HTTP request passes before Ferret sees it (a plain ASGI middleware, so the MCP endpoint is
behind it too): no key in a URL, a body under its cap and in time, a live key (``Authorization: Bearer``),
what the route does allowed to that key in the route's namespace (``ferret.serve.access``), and the key's
rate. Wrong keys are slowed down (``ferret.serve.failed_keys``); Redis out of reach is a 503.

Each refusal is a JSON error, counted by reason; nothing behind the gate runs, so nothing is written.
A presented key is never logged, echoed or put in a label."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aredis
from limits import parse as parse_rate
from limits.aio.storage import RedisStorage
from limits.aio.strategies import FixedWindowRateLimiter
from starlette.routing import Match

from ferret import keys
from ferret.redis_plumbing.redis_conn import REDIS_AWAY, reason
from ferret.serve.access import Action, Refused, authorize, declared
from ferret.serve.api_keys import ApiKey, VerifiedKeys, key_id_of, looks_like_a_key
from ferret.serve.failed_keys import FailedKeys
from ferret.serve.http_metrics import HttpMetrics
from ferret.settings import HttpSettings

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"})
KEY_PARAMS = re.compile(r"(^|&)(key|api_key|apikey|token|access_token|authorization)=", re.IGNORECASE)
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AWAY_RETRY_SECONDS = 1
LOG = logging.getLogger("ferret.serve")


class RateLimits:
    """Per-key request rates, counted in Redis by ``limits``' fixed windows (so every server shares them,
    and a window ends on Redis's clock: its counter expires)."""

    def __init__(self, client: aredis.Redis, default: str) -> None:
        storage = RedisStorage("async+redis://pool:0", implementation="redispy", key_prefix=keys.rate_limit_prefix(),
                               connection_pool=client.connection_pool)  # type: ignore[arg-type]  # given to redis-py
        self.limiter = FixedWindowRateLimiter(storage)
        self.default = default
        self._parsed: dict[str, Any] = {}

    def _item(self, rate: str) -> Any:
        if rate not in self._parsed:
            self._parsed[rate] = parse_rate(rate)
        return self._parsed[rate]

    async def retry_after(self, key: ApiKey) -> int | None:
        """None when the key may go on; else the seconds until its window ends."""
        item = self._item(key.rate or self.default)
        if await self.limiter.hit(item, key.key_id):
            return None
        stats = await self.limiter.get_window_stats(item, key.key_id)
        return max(1, math.ceil(stats.reset_time - time.time()))


class Gate:
    """``routes``: the app's routes; each under ``/v1`` declares what it does (``ferret.serve.access.needs``)."""

    def __init__(self, app: App, routes: list[Any], client: aredis.Redis, settings: HttpSettings,
                 metrics: HttpMetrics) -> None:
        self.app = app
        self.routes = routes
        self.settings = settings
        self.metrics = metrics
        self.rates = RateLimits(client, settings.rate_limit)
        self.keys = VerifiedKeys(client)
        self.failed = FailedKeys(settings.failed_keys_per_id, settings.failed_keys_per_address)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            try:
                receive = await self._admit(scope, receive)
            except REDIS_AWAY as exc:
                LOG.warning("Redis did not answer a request's key or rate check (%s): 503", reason(exc))
                raise Refused(503, "unavailable", f"Redis does not answer: {reason(exc)}",
                              {"retry-after": str(AWAY_RETRY_SECONDS)}) from None
        except Refused as refused:
            self.metrics.refusals.labels(refused.reason).inc()
            await _answer(send, refused.status, {"error": {"code": refused.reason, "message": refused.message}},
                          refused.headers)
            return
        await self.app(scope, receive, send)

    async def _admit(self, scope: Scope, receive: Receive) -> Receive:
        path = scope["path"]
        query = scope.get("query_string", b"").decode("latin-1")
        if looks_like_a_key(unquote(query)) or looks_like_a_key(unquote(path)) or KEY_PARAMS.search(query):
            raise Refused(400, "key_in_url", "an API key goes in the Authorization header (Bearer KEY), never in a "
                                             "URL: URLs are logged by proxies and kept in histories")
        if path in OPEN_PATHS or not (path.startswith("/v1/") or _is_mcp(path)):
            return receive
        key = await self._key(scope)
        if _is_mcp(path):  # each tool asks what the key may do (ferret.serve.mcp_mount)
            if len(key.namespaces) != 1:
                raise Refused(403, "mcp_needs_one_namespace", "the MCP endpoint takes its namespace from the key: "
                                                             "use a key made for exactly one namespace")
        else:
            routed = self._route(scope)
            if routed is not None:
                authorize(key, *routed)
        wait = await self.rates.retry_after(key)
        if wait is not None:
            raise Refused(429, "rate_limited", f"this key's rate ({key.rate or self.settings.rate_limit}) is used up: "
                                               f"retry in {wait} s", {"retry-after": str(wait)})
        scope.setdefault("state", {})["ferret_key"] = key
        if scope["method"] in BODY_METHODS:
            return await self._whole_body(scope, receive)
        return receive

    def _route(self, scope: Scope) -> tuple[str, Action] | None:
        """The namespace and action of the route the request is for; None when no route takes it (the app
        answers 404 or 405)."""
        for route in self.routes:
            matched, child = route.matches(scope)
            if matched is Match.FULL:
                action = declared(getattr(route, "endpoint", None))
                namespace = child.get("path_params", {}).get("namespace")
                if action is None or namespace is None:
                    raise RuntimeError(f"route {getattr(route, 'path', route)} declares no namespace or action")
                return str(namespace), action
        return None

    async def _key(self, scope: Scope) -> ApiKey:
        given = _header(scope, b"authorization")
        if given is None:
            raise Refused(401, "no_key", "send the key as Authorization: Bearer KEY",
                          {"www-authenticate": "Bearer"})
        scheme, _, presented = given.partition(" ")
        presented = presented.strip()
        key_id, address = key_id_of(presented), _address(scope)
        wait = self.failed.retry_after(key_id, address)
        if wait is not None:
            raise Refused(429, "too_many_failures", f"too many wrong keys from here or for this key id: retry in "
                                                    f"{wait} s", {"retry-after": str(wait)})
        key = await self.keys.verify(presented) if scheme.lower() == "bearer" else None
        if key is None:
            self.failed.failed(key_id, address)
            raise Refused(401, "bad_key", "the key is not valid", {"www-authenticate": 'Bearer error="invalid_token"'})
        if not key.live:
            raise Refused(401, "revoked_key", "the key was revoked",
                          {"www-authenticate": 'Bearer error="invalid_token"'})
        return key

    async def _whole_body(self, scope: Scope, receive: Receive) -> Receive:
        """The body, read here under its cap and deadline, then handed on as one message."""
        cap = self.settings.max_body_bytes
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise Refused(413, "too_large", f"the body is larger than {cap} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.settings.body_timeout_seconds):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return receive  # the client left: the app sees it
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > cap:
                        raise Refused(413, "too_large", f"the body is larger than {cap} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise Refused(408, "body_too_slow", f"the body did not arrive within "
                                                f"{self.settings.body_timeout_seconds:g} s") from None
        body = b"".join(chunks)
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        return replay


def _is_mcp(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


def _address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def _answer(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
           *((k.encode(), v.encode()) for k, v in headers.items())]
    if status in (400, 408, 413):  # the rest of the body may still be coming
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
