"""The ``nous`` backend: HTTP to a Nous memory server (httpx, pooled).

Facts about the real server this client handles:
- errors come as JSON ``{"error": ...}`` with 400/404, unhandled ones as
  ``500 text/plain``;
- an empty result may come without the ``qcs`` key;
- a ``limit`` above 33 makes it fall back silently to an unscored substring
  match, so no call ever asks for more than ``max_limit`` (33);
- scores are in [0, 1] and not max-normalised, and drift a little from call
  to call (each search bumps an access counter);
- ``time_range`` is applied only when it has both ``start`` and ``end`` (a
  one-sided range is silently ignored), so the open side is sent as the
  earliest or latest moment the server can hold;
- ``lifecycle`` is matched case-sensitively against upper-case values, so it
  is sent upper case (the local backend accepts either).
Filters mean the same as on the local backend: every hit is also checked on
this side (``filtering.matches``), so a filter the server ignored or read
differently never lets a wrong memory through.
Every failure is raised as ``BackendUnavailable`` (could not reach it, timed
out, 5xx) or ``BackendProtocolError`` (4xx, or an answer of the wrong shape).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import redis
from pydantic import ValidationError

from ferret import keys
from ferret.errors import BackendError, BackendProtocolError, BackendUnavailable, NamespaceNotServed
from ferret.records import Filters, Hit, Memory, TimeRange
from ferret.settings import NousSettings
from worker.backends.filtering import matches
from worker.backends.http_json import call_json
from worker.backends.linking import linked_hits, neighbour_scores

NAME = "nous"


# The open side of a one-sided time range, as the server can parse it.
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


def _wire_time_range(time_range: TimeRange) -> dict[str, Any]:
    closed = time_range.model_copy(update={"start": time_range.start or EARLIEST, "end": time_range.end or LATEST})
    return closed.model_dump(mode="json")


def _search_body(query: str, limit: int, filters: Filters) -> dict[str, Any]:
    body: dict[str, Any] = {"query": query, "limit": limit}
    for key in ("type", "subtype"):
        value = getattr(filters, key)
        if value:
            body[key] = value
    if filters.lifecycle:
        body["lifecycle"] = filters.lifecycle.upper()
    if filters.time_range:
        body["time_range"] = _wire_time_range(filters.time_range)
    if filters.cluster_ids:
        body["cluster_ids"] = list(filters.cluster_ids)
    return body


def _to_hit(item: Any) -> Hit:
    if not isinstance(item, dict):
        raise BackendProtocolError(NAME, f"search item is {type(item).__name__}, not an object")
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise BackendProtocolError(NAME, f"search item {item.get('id')!r} has no numeric score")
    try:
        memory = Memory.model_validate(item)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "node"
        raise BackendProtocolError(NAME, f"search item {str(item.get('id'))[:60]!r} is not a node: "
                                         f"{field}: {error['msg']}") from exc
    clipped = min(1.0, max(0.0, float(score)))
    return Hit.of(memory, clipped)


class NousBackend:
    name = NAME
    retrievers = ("lexical", "graph")  # graph: the server's edges

    def __init__(self, settings: NousSettings, transport: httpx.BaseTransport | None = None) -> None:
        self.settings = settings
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_seconds, connect=settings.connect_timeout_seconds),
            limits=httpx.Limits(max_connections=settings.max_connections),
            transport=transport,
        )

    def _post(self, path: str, body: dict[str, Any], timeout: float | None) -> Any:
        return self._call("POST", path, timeout, json=body)

    def _call(self, method: str, path: str, timeout: float | None, **request: Any) -> Any:
        budget = self.settings.timeout_seconds if timeout is None else min(timeout, self.settings.timeout_seconds)
        return call_json(self._client, NAME, method, path, budget, self.settings.connect_timeout_seconds, **request)

    def search(
        self, query: str, limit: int, filters: Filters, timeout: float | None = None
    ) -> list[Hit]:
        capped = max(1, min(limit, self.settings.max_limit))
        payload = self._post("search", _search_body(query, capped, filters), timeout)
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise BackendProtocolError(NAME, "search answer has no 'data' list")
        hits = [hit for hit in map(_to_hit, payload["data"]) if matches(hit.memory, filters)]
        return sorted(hits, key=lambda h: (-h.score, h.id))

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        try:
            payload = self._post("classify-query", {"query": query}, timeout)
        except BackendError:
            return None
        return payload if isinstance(payload, dict) else None

    def edges(self, node_id: str, timeout: float | None = None) -> list[dict[str, Any]]:
        """The node's edges, both directions: ``GET /v1/edges?node_id=..&direction=both``."""
        payload = self._call("GET", "edges", timeout, params={"node_id": node_id, "direction": "both"})
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            raise BackendProtocolError(NAME, "edges answer has no 'data' list")
        return [edge for edge in payload["data"] if isinstance(edge, dict)]

    def node(self, node_id: str, timeout: float | None = None) -> Memory | None:
        """``GET /v1/nodes/{id}``: the node, or None when the server has none (404)."""
        try:
            payload = self._call("GET", f"nodes/{quote(node_id, safe='')}", timeout)
        except BackendProtocolError as exc:
            if " 404:" in str(exc):
                return None
            raise
        node = payload.get("data") if isinstance(payload, dict) else None
        try:
            return Memory.model_validate(node)
        except ValidationError as exc:
            raise BackendProtocolError(NAME, f"nodes/{node_id} answered a node of the wrong shape") from exc

    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters,
               timeout: float | None = None) -> list[Hit]:
        """The graph retriever on Nous: the seeds' edges (strength), then the linked nodes.
        One call per seed and one per neighbour read, so few seeds and a small limit."""
        links: dict[str, dict[str, float]] = {}
        for seed in seeds:
            row = links.setdefault(seed.id, {})
            for edge in self.edges(seed.id, timeout):
                ends = (edge.get("source_id"), edge.get("target_id"))
                other = ends[1] if ends[0] == seed.id else ends[0]
                strength = edge.get("strength")
                if isinstance(other, str) and isinstance(strength, int | float) and not isinstance(strength, bool):
                    row[other] = max(float(strength), row.get(other, 0.0))

        def read(ids: list[str]) -> dict[str, Memory]:
            found = (self.node(i, timeout) for i in ids)
            return {m.id: m for m in found if m is not None}
        return linked_hits(neighbour_scores(seeds, links), limit, filters, read)

    def strengthen_edge(self, edge_id: str, amount: float, timeout: float | None = None) -> None:
        """``POST /v1/edges/{id}/strengthen`` with ``{amount}`` (the server caps strength at 1.0)."""
        self._post(f"edges/{quote(edge_id, safe='')}/strengthen", {"amount": amount}, timeout)

    def put_node(self, memory: Memory, timeout: float | None = None) -> None:
        """``POST /v1/nodes`` with the node's fields (the server keeps the given id)."""
        self._post("nodes", memory.model_dump(mode="json", exclude_none=True, exclude={"memory_section"}), timeout)

    def delete_node(self, node_id: str, timeout: float | None = None) -> bool:
        """``DELETE /v1/nodes/{id}``; False when the server has no such node (404)."""
        try:
            self._call("DELETE", f"nodes/{quote(node_id, safe='')}", timeout)
        except BackendProtocolError as exc:
            if " 404:" in str(exc):
                return False
            raise
        return True

    def close(self) -> None:
        self._client.close()


class NousBackends:
    """One client per Nous server. A Nous server has no namespaces: it holds
    one tenant's memories, so each Ferret namespace maps to a server of its
    own (``backend.nous.namespaces``; ``base_url`` serves ``default``), and a
    namespace with none is refused, never served another tenant's memories."""

    def __init__(self, settings: NousSettings, transport: httpx.BaseTransport | None = None,
                 client: redis.Redis | None = None) -> None:
        self.settings = settings
        self._redis = client
        # Built at start-up, one per server (a client costs milliseconds to build: not a job's).
        urls = {settings.base_url, *settings.namespaces.values()}
        self._clients = {url: NousBackend(settings.model_copy(update={"base_url": url}), transport) for url in urls}

    def for_namespace(self, namespace: str, at_least: int | None = None,
                      wait_seconds: float | None = None) -> NousBackend:
        url = self.settings.url_for(namespace)
        if url is None:
            raise NamespaceNotServed(NAME, f"no Nous server for namespace {namespace!r}: this backend serves "
                                           "'default' and the namespaces in backend.nous.namespaces")
        return self._clients[url]

    def version(self, namespace: str) -> int:
        """The namespace's write counter: bumped by every write that goes through
        Ferret (``NousWriter``), so those invalidate the cache at once. Writes
        made to the server directly are seen within ``cache.remote_staleness_seconds``."""
        if self._redis is None:
            return 0
        try:
            return int(self._redis.get(keys.memory_version(namespace)) or 0)
        except redis.RedisError as exc:
            raise BackendUnavailable(NAME, f"write counter unreadable: {exc}") from exc

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
