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
  is sent upper case (the local backend accepts either);
- a search hit shows the node as decay sees it: its ``state_lifecycle`` is
  recomputed (a node set DORMANT reads ACTIVE in the hit) and it carries no
  cluster field at all; ``GET /v1/nodes/{id}`` answers the node object itself;
- ``POST /v1/nodes`` names the node itself (an ``id`` in the body is ignored)
  and ``DELETE /v1/nodes/{id}`` answers ``{"ok": true}`` whether or not the
  node existed.
Filters, one by one (``FILTER_POLICY``): the server applies every filter Ferret
sends (``type`` and ``cluster_ids`` inside its search; ``subtype``,
``lifecycle`` and a time range with both ends on the stored node), so its
answer is trusted. Ferret re-checks on its side only what a hit carries as
stored (``type``, ``subtype``, the time fields): never ``lifecycle`` (stale in
a hit) nor clusters (absent from a hit). Checking those would need a
``GET /v1/nodes/{id}`` per hit, one more round trip for each of up to 33 hits,
to repeat what the server already did.
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
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.http_json import call_json
from ferret.worker.backends.linking import linked_hits, neighbour_scores
from ferret.worker.endpoint_health import EndpointHealth

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


# How each filter is honoured: "server" = applied by the server only (a hit does not
# carry the field, or carries it stale); "both" = applied by the server and re-checked
# here on the field the hit carries as stored.
FILTER_POLICY: dict[str, str] = {
    "type": "both",
    "subtype": "both",
    "time_range": "both",  # a one-sided range is closed before it is sent, so the server applies it
    "lifecycle": "server",  # a hit's state_lifecycle is recomputed by decay, not the stored value
    "cluster_ids": "server",  # a hit has no cluster field
}


def rechecked(filters: Filters) -> Filters:
    """The part of ``filters`` a hit can be checked against on this side."""
    return filters.model_copy(update={name: None for name, policy in FILTER_POLICY.items() if policy == "server"})


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


def _node_of(payload: Any, where: str) -> Memory:
    try:
        return Memory.model_validate(payload)
    except ValidationError as exc:
        raise BackendProtocolError(NAME, f"{where} answered a node of the wrong shape") from exc


# What ``POST``/``PATCH /v1/nodes`` take (the server ignores the rest: the id, lifecycle,
# creation time and clusters are its own).
WRITABLE_FIELDS = ("type", "subtype", "content_title", "content_summary", "content_body", "temporal_event_time")


def _writable(memory: Memory, clear_missing: bool = False) -> dict[str, Any]:
    """The node's fields for a write; with ``clear_missing`` (an update), a field the
    memory does not have is sent as null so the stored one is cleared."""
    fields = memory.model_dump(mode="json", include=set(WRITABLE_FIELDS))
    if clear_missing:
        return {name: (value if value != "" else None) for name, value in fields.items()}
    return {name: value for name, value in fields.items() if value not in (None, "")}


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
        local = rechecked(filters)
        hits = [hit for hit in map(_to_hit, payload["data"]) if matches(hit.memory, local)]
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

    def _node_call(self, method: str, node_id: str, timeout: float | None, **request: Any) -> Memory | None:
        """A call on ``nodes/{id}`` that answers the node (the object itself); None on a 404."""
        try:
            payload = self._call(method, f"nodes/{quote(node_id, safe='')}", timeout, **request)
        except BackendProtocolError as exc:
            if " 404:" in str(exc):
                return None
            raise
        return _node_of(payload, f"nodes/{node_id}")

    def node(self, node_id: str, timeout: float | None = None) -> Memory | None:
        """``GET /v1/nodes/{id}``: the node, or None when the server has none (404)."""
        return self._node_call("GET", node_id, timeout)

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

    def put_node(self, memory: Memory, timeout: float | None = None) -> Memory:
        """``POST /v1/nodes`` with the node's fields; the server names the node itself:
        the answer (the stored node, under the server's id) is returned."""
        payload = self._post("nodes", _writable(memory), timeout)
        return _node_of(payload, "nodes")

    def patch_node(self, node_id: str, memory: Memory, timeout: float | None = None) -> Memory | None:
        """``PATCH /v1/nodes/{id}`` with ``memory``'s fields; None when the server has no such node."""
        return self._node_call("PATCH", node_id, timeout, json=_writable(memory, clear_missing=True))

    def delete_node(self, node_id: str, timeout: float | None = None) -> bool:
        """``DELETE /v1/nodes/{id}``; False when the server has no such node. The server
        answers ``ok`` either way, so the node is looked up first."""
        if self.node(node_id, timeout) is None:
            return False
        self._call("DELETE", f"nodes/{quote(node_id, safe='')}", timeout)
        return True

    def close(self) -> None:
        self._client.close()


class NousBackends:
    """One client per Nous server. A Nous server has no namespaces: it holds
    one tenant's memories, so each Ferret namespace maps to a server of its
    own (``backend.nous.namespaces``; ``base_url`` serves ``default``), and a
    namespace with none is refused, never served another tenant's memories."""

    def __init__(self, settings: NousSettings, transport: httpx.BaseTransport | None = None,
                 client: redis.Redis | None = None, health: EndpointHealth | None = None) -> None:
        """``health``: the worker's circuit breakers, one per server."""
        self.settings = settings
        self._redis = client
        # Built at start-up, one per server (a client costs milliseconds to build: not a job's).
        urls = {settings.base_url, *settings.namespaces.values()}
        self._clients = {url: NousBackend(settings.model_copy(update={"base_url": url}),
                                          health.transport(f"nous {url}", transport) if health else transport)
                         for url in urls}

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
