"""A fake Nous memory server on loopback: the real ``nous-server``'s twin.

It answers every request Ferret makes the way the real server does (the
contract tests in ``tests/contract/test_nous_twin.py`` run against this fake
and against a recording of the real server, so the two cannot drift):

- ``POST /v1/search`` answers ``{data, count, metrics, qcs}``, and only
  ``{data, count, metrics}`` when nothing matched. Filters: ``type`` and
  ``cluster_ids`` are applied inside the search; ``subtype`` and ``lifecycle``
  are applied afterwards to the stored node, case-sensitively (``dormant``
  finds nothing), on twice ``limit`` candidates, so a post-filtered search can
  return fewer than ``limit``; ``time_range`` is applied only when it has both
  ``start`` and ``end`` (a one-sided range is silently ignored).
- a search hit is the stored node **as decay sees it**: ``state_lifecycle``
  is recomputed from the node's recall, so a node set DORMANT reads
  ``ACTIVE`` in a hit (``GET /v1/nodes/{id}`` keeps DORMANT); hits carry no
  cluster field at all; ``memory_section`` comes from the subtype; fields a
  node was created without are ``null``; ``score`` in [0, 1], rounded to 4
  places, drifting a little with each node's access count.
- a ``limit`` above 33 falls back silently to an unscored substring match:
  ``{data, count}`` with no ``score`` in the items.
- ``GET /v1/nodes/{id}`` answers the node object itself (not wrapped), 404
  ``{"error": "not found"}``.
- ``POST /v1/nodes`` needs ``type`` and ``content_title`` (400 otherwise),
  **names the node itself** (``n_`` + 12 characters; an ``id`` in the body is
  ignored, as are ``state_lifecycle`` and ``provenance_created_at``, which is
  the time of the write) and answers 201 with the node.
  ``PATCH /v1/nodes/{id}`` updates the allowed fields (404, or 400 when none).
  ``DELETE /v1/nodes/{id}`` answers ``{"ok": true}`` whether or not it existed.
- ``GET /v1/edges?node_id=..&direction=both|in|out`` answers ``{data, count}``
  with the edge rows (``id, type, subtype, source_id, target_id,
  neural_weight, strength, confidence, created_at``); no ``node_id``: 400.
  ``POST /v1/edges`` creates one (201, the row); ``POST
  /v1/edges/{id}/strengthen`` adds ``amount`` (default 0.05, unchecked) to
  its strength, capped at 1.0, and answers the row (404 ``not found``).
- ``POST /v1/clusters`` (``{name}``, 201) and ``POST
  /v1/clusters/{id}/members`` (``{node_ids}``); ``POST /v1/classify-query``.
- errors: 400/404 as JSON ``{"error": ...}``; an unknown route 404 ``404 Not
  Found`` as text/plain; a body that is not JSON ``500 Internal Server Error``
  as text/plain.

A fake can also start with memories already stored (the ``memories``
argument: their ids and ``cluster_ids`` memberships kept, as a server whose
database already holds them). Scores come from the same lexical index as the
in-memory backend. ``mode`` injects faults: ``error500``, ``garbage``
(invalid JSON), ``wrong_types``, ``slow`` (sleeps ``delay`` seconds).
"""

from __future__ import annotations

import json
import secrets
import string
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import ValidationError

from ferret.records import Filters, Memory, Section
from ferret.section_words import TRADING_KINDS
from ferret.worker.backends.filtering import matches
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.fakes.loopback import LoopbackServer
from ferret.worker.pipeline.sections import subtype_label

MAX_SCORED_LIMIT = 33
DRIFT_PER_ACCESS = 0.0005  # score added per earlier search that returned the node
MAX_DRIFT = 0.01
PATCHABLE = ("type", "subtype", "content_title", "content_summary", "content_body", "state_lifecycle",
             "temporal_event_time")
_ID_ALPHABET = string.ascii_letters + string.digits + "_-"


def _server_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FakeNous(LoopbackServer):
    def __init__(self, memories: list[Memory]) -> None:
        self.memories = list(memories)
        self.backend = InMemoryBackend(self.memories)
        self.clusters: dict[str, dict[str, Any]] = {}  # id -> {id, name, members: set of node ids}
        for memory in self.memories:
            for cluster_id in memory.cluster_ids:
                self.clusters.setdefault(cluster_id, {"id": cluster_id, "name": cluster_id, "members": set()})
                self.clusters[cluster_id]["members"].add(memory.id)
        self.mode = "ok"
        self.delay = 0.0
        self.slow_terms: set[str] = set()  # queries containing one of these sleep ``delay``
        self.slow_first = 0  # the first N search requests sleep ``delay``
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self.max_limit_seen = 0
        self.auth_headers: list[str | None] = []
        self.edges: dict[str, dict[str, Any]] = {}  # id -> the edge row
        self.strengthened: list[tuple[str, float]] = []
        self.accesses: dict[str, int] = {}
        super().__init__()

    # -- the server's state, as its own API changes it -------------------------------------------

    def put(self, memory: Memory) -> None:
        """Store (or replace) a node under its own id, as a write on the server itself does."""
        with self._lock:
            self.memories = [m for m in self.memories if m.id != memory.id] + [memory]
            self.backend = InMemoryBackend(self.memories)

    def remove(self, node_id: str) -> bool:
        with self._lock:
            kept = [m for m in self.memories if m.id != node_id]
            found = len(kept) != len(self.memories)
            self.memories, self.backend = kept, InMemoryBackend(kept)
            for cluster in self.clusters.values():
                cluster["members"].discard(node_id)
        return found

    def find(self, node_id: str) -> Memory | None:
        with self._lock:
            return next((m for m in self.memories if m.id == node_id), None)

    def add_edge(self, edge_id: str, source_id: str, target_id: str, strength: float = 0.5,
                 edge_type: str = "relates_to") -> dict[str, Any]:
        row = {"id": edge_id, "type": edge_type, "subtype": None, "source_id": source_id, "target_id": target_id,
               "neural_weight": strength, "strength": strength, "confidence": 1,
               "created_at": _now().replace("T", " ")[:19]}
        self.edges[edge_id] = row
        return row

    # -- HTTP ------------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        self.auth_headers.append(handler.headers.get("Authorization"))
        if self.mode == "slow":
            time.sleep(self.delay)
        if self.mode == "error500":
            return self._send(handler, 500, b"Internal Server Error", "text/plain; charset=UTF-8")
        if self.mode == "garbage":
            return self._send(handler, 200, b"{not json", "application/json")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:  # the real server's body parser throws; its error handler answers plain text
            return self._send(handler, 500, b"Internal Server Error", "text/plain; charset=UTF-8")
        if not isinstance(body, dict):
            body = {}
        self.requests.append((handler.path, body))
        query_text = str(body.get("query", "")).lower()
        with self._lock:
            slow_now = self.slow_first > 0 and handler.path == "/v1/search"
            if slow_now:
                self.slow_first -= 1
        if slow_now or any(term in query_text for term in self.slow_terms):
            time.sleep(self.delay)
        return self._route(handler, handler.command, urlsplit(handler.path).path, body)

    def _route(self, handler: BaseHTTPRequestHandler, method: str, path: str, body: dict[str, Any]) -> None:
        parts = [unquote(p) for p in path.split("/")[1:]]  # "", "v1", ... -> "v1", ...
        if parts[:1] != ["v1"]:
            return self._not_routed(handler)
        route = parts[1:]
        if method == "POST" and route == ["search"]:
            return self._search(handler, body)
        if method == "POST" and route == ["classify-query"]:
            return self._classify(handler, body)
        if route == ["nodes"] and method == "POST":
            return self._create_node(handler, body)
        if len(route) == 2 and route[0] == "nodes":
            if method == "GET":
                return self._get_node(handler, route[1])
            if method == "PATCH":
                return self._patch_node(handler, route[1], body)
            if method == "DELETE":
                self.remove(route[1])
                return self._json(handler, 200, {"ok": True})
        if route == ["edges"] and method == "GET":
            return self._list_edges(handler)
        if route == ["edges"] and method == "POST":
            return self._create_edge(handler, body)
        if len(route) == 3 and route[0] == "edges" and route[2] == "strengthen" and method == "POST":
            return self._strengthen(handler, route[1], body)
        if route == ["clusters"] and method == "POST":
            return self._create_cluster(handler, body)
        if len(route) == 3 and route[0] == "clusters" and route[2] == "members" and method == "POST":
            return self._add_members(handler, route[1], body)
        if route == ["health"] and method == "GET":
            return self._json(handler, 200, {"status": "ok", "node_count": len(self.memories),
                                             "edge_count": len(self.edges)})
        return self._not_routed(handler)

    def _not_routed(self, handler: BaseHTTPRequestHandler) -> None:
        return self._send(handler, 404, b"404 Not Found", "text/plain; charset=UTF-8")

    def _classify(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        query = body.get("query")
        if not isinstance(query, str) or not query:
            return self._json(handler, 400, {"error": "query string is required"})
        return self._json(handler, 200, {"query": query, "disqualified": False, "disqualifier_category": None,
                                         "disqualifier_reason": None, "query_type": "LOOKUP", "confidence": 0.8,
                                         "entity": None, "attribute": None})

    def _create_node(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if not body.get("type") or not body.get("content_title"):
            return self._json(handler, 400, {"error": "type and content_title are required"})
        fields = {k: body.get(k) for k in ("type", "subtype", "content_title", "content_summary", "content_body",
                                           "temporal_event_time")}
        try:
            memory = Memory.model_validate({**fields, "id": _server_id("n_"), "state_lifecycle": "ACTIVE",
                                            "provenance_created_at": _now()})
        except ValidationError:  # the real server stores whatever it is given; Ferret never sends such
            return self._send(handler, 500, b"Internal Server Error", "text/plain; charset=UTF-8")
        self.put(memory)
        return self._json(handler, 201, stored_node(memory))

    def _get_node(self, handler: BaseHTTPRequestHandler, node_id: str) -> None:
        found = self.find(node_id)
        if found is None:
            return self._json(handler, 404, {"error": "not found"})
        return self._json(handler, 200, stored_node(found))

    def _patch_node(self, handler: BaseHTTPRequestHandler, node_id: str, body: dict[str, Any]) -> None:
        found = self.find(node_id)
        if found is None:
            return self._json(handler, 404, {"error": "not found"})
        update = {k: body[k] for k in PATCHABLE if k in body}
        if not update:
            return self._json(handler, 400, {"error": "no valid fields to update"})
        memory = Memory.model_validate({**found.model_dump(), **update})
        self.put(memory)
        return self._json(handler, 200, stored_node(memory))

    def _list_edges(self, handler: BaseHTTPRequestHandler) -> None:
        params = parse_qs(urlsplit(handler.path).query)
        node = params.get("node_id", [""])[0]
        direction = params.get("direction", ["both"])[0]
        if not node:
            return self._json(handler, 400, {"error": "node_id query parameter is required"})
        ends = {"out": ("source_id",), "in": ("target_id",)}.get(direction, ("source_id", "target_id"))
        data = [dict(e) for e in self.edges.values() if any(e[end] == node for end in ends)]
        return self._json(handler, 200, {"data": data, "count": len(data)})

    def _create_edge(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if not body.get("source_id") or not body.get("target_id") or not body.get("type"):
            return self._json(handler, 400, {"error": "source_id, target_id, and type are required"})
        row = self.add_edge(_server_id("e_"), body["source_id"], body["target_id"],
                            float(body.get("strength", 0.5)), body["type"])
        return self._json(handler, 201, dict(row))

    def _strengthen(self, handler: BaseHTTPRequestHandler, edge_id: str, body: dict[str, Any]) -> None:
        amount = body.get("amount", 0.05)
        with self._lock:
            edge = self.edges.get(edge_id)
            if edge is None:
                return self._json(handler, 404, {"error": "not found"})
            edge["strength"] = edge["neural_weight"] = min(1.0, edge["strength"] + amount)
            self.strengthened.append((edge_id, float(amount)))
        return self._json(handler, 200, dict(edge))

    def _create_cluster(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return self._json(handler, 400, {"error": "name is required"})
        cluster_id = _server_id("cl_")
        self.clusters[cluster_id] = {"id": cluster_id, "name": name, "members": set()}
        return self._json(handler, 201, {"id": cluster_id, "name": name, "description": None, "icon": None,
                                         "pinned": 0, "source": "user_created", "auto_subtypes": None,
                                         "created_at": _now()})

    def _add_members(self, handler: BaseHTTPRequestHandler, cluster_id: str, body: dict[str, Any]) -> None:
        cluster = self.clusters.get(cluster_id)
        if cluster is None:
            return self._json(handler, 404, {"error": "cluster not found"})
        ids = body.get("node_ids") or ([body["node_id"]] if body.get("node_id") else [])
        if not ids:
            return self._json(handler, 400, {"error": "node_id or node_ids is required"})
        cluster["members"].update(ids)
        return self._json(handler, 200, {"ok": True, "added": len(ids), "cluster_id": cluster_id})

    def _search(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        query, limit = body.get("query"), body.get("limit", 10)
        if not isinstance(query, str) or not query:
            return self._json(handler, 400, {"error": "query string is required"})
        if not isinstance(limit, int) or limit < 1:
            return self._json(handler, 400, {"error": "limit must be a positive integer"})
        self.max_limit_seen = max(self.max_limit_seen, limit)
        if self.mode == "wrong_types":
            return self._json(handler, 200, {"data": {"oops": 1}, "count": "x"})
        if limit > MAX_SCORED_LIMIT:  # the real server's silent fallback: a LIKE match, no scores
            found = [m for m in self.memories if query.lower() in m.text.lower()][:limit]
            data = [decayed_node(m) for m in found]
            return self._json(handler, 200, {"data": data, "count": len(data)})
        hits = self._scored(query, limit, body)
        data = [{**decayed_node(memory), "score": score, "breakdown": {"keyword": score},
                 "primary_signal": "keyword"} for memory, score in hits]
        payload: dict[str, Any] = {"data": data, "count": len(data), "metrics": {"seed_count": len(data)}}
        if data:
            payload["qcs"] = {"query_type": "LOOKUP", "confidence": 0.8, "disqualified": False,
                              "disqualifier_category": None}
        return self._json(handler, 200, payload)

    def _scored(self, query: str, limit: int, body: dict[str, Any]) -> list[tuple[Memory, float]]:
        """The real server's search: type and clusters inside the search, on twice ``limit``
        candidates; then subtype, lifecycle (as stored, case-sensitively) and a time range
        with both ends on the stored node; scores drifting with each node's accesses."""
        kind, clusters = body.get("type"), body.get("cluster_ids")
        members: set[str] | None = None
        if isinstance(clusters, list) and clusters:
            members = set().union(*(self.clusters.get(c, {}).get("members", set()) for c in clusters))
        native = Filters(type=kind if isinstance(kind, str) else None)
        found = self.backend.search(query, len(self.memories) or 1, native)
        candidates = [h for h in found if members is None or h.id in members][:limit * 2]
        time_range = body.get("time_range") if isinstance(body.get("time_range"), dict) else None
        if time_range is not None and not (time_range.get("start") and time_range.get("end")):
            time_range = None
        try:
            post = Filters.model_validate({"subtype": body.get("subtype"), "time_range": time_range})
        except ValidationError:
            post = Filters()
        lifecycle = body.get("lifecycle")
        hits = [h for h in candidates if matches(h.memory, post)
                and (not lifecycle or h.memory.state_lifecycle == lifecycle)]
        scored = []
        with self._lock:
            for hit in hits[:limit]:
                seen = self.accesses.get(hit.id, 0)
                self.accesses[hit.id] = seen + 1
                drift = min(MAX_DRIFT, seen * DRIFT_PER_ACCESS)
                scored.append((hit.memory, round(min(1.0, hit.score + drift), 4)))
        return sorted(scored, key=lambda pair: -pair[1])


def stored_node(memory: Memory) -> dict[str, Any]:
    """A node as the real server sends it from its table: fields a node was created
    without are ``null`` (not absent, not ""), no cluster field, and fields Ferret
    does not use."""
    node: dict[str, Any] = memory.model_dump(mode="json", exclude={"memory_section", "cluster_ids"})
    for name in ("content_body", "content_summary", "temporal_event_time", "provenance_created_at", "subtype",
                 "state_lifecycle"):
        node[name] = node.get(name) or None
    node.update(embedding_vector=None, embedding_model=None, temporal_event_confidence=None,
                temporal_event_source=None, neural_stability=0.5, neural_retrievability=1, neural_difficulty=0.3,
                neural_access_count=0, provenance_source="agent", layer="semantic", version=1,
                memory_section=_server_section(memory))
    return node


def _server_section(memory: Memory) -> str:
    """The server's own section: from the subtype by seed 003's trading table, else KNOWLEDGE (it knows
    no other kinds)."""
    return (memory.memory_section or TRADING_KINDS.get(subtype_label(memory.subtype), Section.KNOWLEDGE)).value


def decayed_node(memory: Memory) -> dict[str, Any]:
    """A node as a search hit shows it: its lifecycle recomputed from recall (every
    node here was recalled recently, so ACTIVE, whatever is stored)."""
    return {**stored_node(memory), "state_lifecycle": "ACTIVE"}


def nous_env(fake: FakeNous, timeout_seconds: float | None = None) -> dict[str, str]:
    """Environment that points a worker's ``nous`` backend at ``fake``."""
    env = {"FERRET_BACKEND__KIND": "nous", "FERRET_BACKEND__NOUS__BASE_URL": fake.base_url}
    if timeout_seconds is not None:
        env["FERRET_BACKEND__NOUS__TIMEOUT_SECONDS"] = f"{timeout_seconds:g}"
    return env
