"""A fake Nous memory server on loopback, faithful to the real one's quirks.

- ``POST /v1/search`` answers ``{data, count, metrics, qcs}``; ``qcs`` is left
  out when there are no results;
- nodes come with ``null`` for every field they were created without, with
  fields Ferret ignores (``neural_*``, ``layer``, ``version``, ``breakdown``,
  ``primary_signal``) and with ``memory_section``;
- a ``limit`` above 33 falls back silently to an unscored substring match
  (items carry ``score: 0``) -- the client must never ask for that;
- ``time_range`` is applied only when it has both ``start`` and ``end``: a
  one-sided range is silently ignored;
- ``lifecycle`` is compared as stored, upper case: ``dormant`` finds nothing;
- scores drift a little from call to call: each search bumps the returned
  nodes' access counters, and a node's score grows with its count;
- errors: 400/404 as JSON ``{"error": ...}``; unhandled ones, and bodies
  that are not JSON, as ``500 text/plain``;
- ``GET /v1/nodes/{id}`` answers ``{data: node}`` (404 if unknown);
- ``POST /v1/nodes`` stores a node (201 with the node), ``DELETE
  /v1/nodes/{id}`` removes one (404 if unknown);
- ``POST /v1/classify-query`` answers a QCS-like object;
- ``GET /v1/edges?node_id=..&direction=both`` lists ``edges`` touching the
  node as ``{data: [...]}``; ``POST /v1/edges/{id}/strengthen`` with
  ``{amount}`` adds it to the edge's strength, capped at 1.0 (404 if unknown).
Scores come from the same lexical index as the local backend ([0, 1], not
max-normalised). ``mode`` injects faults: ``error500``, ``garbage`` (invalid
JSON), ``wrong_types``, ``slow`` (sleeps ``delay`` seconds).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import ValidationError

from ferret.records import Filters, Memory
from worker.backends.memory import InMemoryBackend
from worker.fakes.loopback import LoopbackServer
from worker.pipeline.sections import section_for_subtype

MAX_SCORED_LIMIT = 33
DRIFT_PER_ACCESS = 0.0005  # score added per earlier search that returned the node
MAX_DRIFT = 0.01


class FakeNous(LoopbackServer):
    def __init__(self, memories: list[Memory]) -> None:
        self.memories = memories
        self.backend = InMemoryBackend(memories)
        self.mode = "ok"
        self.delay = 0.0
        self.slow_terms: set[str] = set()  # queries containing one of these sleep ``delay``
        self.slow_first = 0  # the first N search requests sleep ``delay``
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self.max_limit_seen = 0
        self.auth_headers: list[str | None] = []
        self.edges: dict[str, dict[str, Any]] = {}  # id -> {id, source_id, target_id, type, strength}
        self.strengthened: list[tuple[str, float]] = []
        self.accesses: dict[str, int] = {}
        super().__init__()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        self.auth_headers.append(handler.headers.get("Authorization"))
        if self.mode == "slow":
            time.sleep(self.delay)
        if self.mode == "error500":
            return self._send(handler, 500, b"Internal Server Error", "text/plain")
        if self.mode == "garbage":
            return self._send(handler, 200, b"{not json", "application/json")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:  # the real server's body parser throws; its error handler answers plain text
            return self._send(handler, 500, b"Internal Server Error", "text/plain")
        self.requests.append((handler.path, body))
        query_text = str(body.get("query", "")).lower()
        with self._lock:
            slow_now = self.slow_first > 0 and handler.path == "/v1/search"
            if slow_now:
                self.slow_first -= 1
        if slow_now or any(term in query_text for term in self.slow_terms):
            time.sleep(self.delay)
        if handler.path == "/v1/search":
            return self._search(handler, body)
        if handler.command == "GET" and handler.path.startswith("/v1/edges?"):
            return self._list_edges(handler)
        if handler.path.startswith("/v1/edges/") and handler.path.endswith("/strengthen"):
            return self._strengthen(handler, unquote(handler.path[len("/v1/edges/"):-len("/strengthen")]), body)
        if handler.command == "POST" and handler.path == "/v1/nodes":
            return self._put_node(handler, body)
        if handler.command == "GET" and handler.path.startswith("/v1/nodes/"):
            return self._get_node(handler, unquote(handler.path[len("/v1/nodes/"):]))
        if handler.command == "DELETE" and handler.path.startswith("/v1/nodes/"):
            return self._delete_node(handler, unquote(handler.path[len("/v1/nodes/"):]))
        if handler.path == "/v1/classify-query":
            return self._json(handler, 200, {"query": body.get("query"), "disqualified": False,
                                             "disqualifier_category": None, "query_type": "LOOKUP",
                                             "confidence": 0.8, "entity": None, "attribute": None})
        return self._json(handler, 404, {"error": f"no route {handler.path}"})

    def put(self, memory: Memory) -> None:
        """Store (or replace) a node, as the server's own API does."""
        with self._lock:
            self.memories = [m for m in self.memories if m.id != memory.id] + [memory]
            self.backend = InMemoryBackend(self.memories)

    def remove(self, node_id: str) -> bool:
        with self._lock:
            kept = [m for m in self.memories if m.id != node_id]
            found = len(kept) != len(self.memories)
            self.memories, self.backend = kept, InMemoryBackend(kept)
        return found

    def _put_node(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        try:
            memory = Memory.model_validate(body)
        except ValidationError as exc:
            error = exc.errors()[0]
            return self._json(handler, 400, {"error": f"{'.'.join(map(str, error['loc']))}: {error['msg']}"})
        self.put(memory)
        return self._json(handler, 201, {"data": wire_node(memory)})

    def _get_node(self, handler: BaseHTTPRequestHandler, node_id: str) -> None:
        with self._lock:
            found = next((m for m in self.memories if m.id == node_id), None)
        if found is None:
            return self._json(handler, 404, {"error": "node not found"})
        return self._json(handler, 200, {"data": wire_node(found)})

    def _delete_node(self, handler: BaseHTTPRequestHandler, node_id: str) -> None:
        if not self.remove(node_id):
            return self._json(handler, 404, {"error": "node not found"})
        return self._json(handler, 200, {"deleted": node_id})

    def add_edge(self, edge_id: str, source_id: str, target_id: str, strength: float = 0.5) -> None:
        self.edges[edge_id] = {"id": edge_id, "source_id": source_id, "target_id": target_id,
                               "type": "relates_to", "strength": strength}

    def _list_edges(self, handler: BaseHTTPRequestHandler) -> None:
        params = parse_qs(urlsplit(handler.path).query)
        node = params.get("node_id", [""])[0]
        if not node:
            return self._json(handler, 400, {"error": "node_id is required"})
        data = [dict(e) for e in self.edges.values() if node in (e["source_id"], e["target_id"])]
        return self._json(handler, 200, {"data": data, "count": len(data)})

    def _strengthen(self, handler: BaseHTTPRequestHandler, edge_id: str, body: dict[str, Any]) -> None:
        amount = body.get("amount")
        if not isinstance(amount, (int, float)) or amount <= 0:
            return self._json(handler, 400, {"error": "amount must be a positive number"})
        with self._lock:
            edge = self.edges.get(edge_id)
            if edge is None:
                return self._json(handler, 404, {"error": "edge not found"})
            edge["strength"] = min(1.0, edge["strength"] + amount)
            self.strengthened.append((edge_id, float(amount)))
        return self._json(handler, 200, dict(edge))

    def _search(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        query, limit = body.get("query"), body.get("limit", 10)
        if not isinstance(query, str) or not query:
            return self._json(handler, 400, {"error": "query is required"})
        if not isinstance(limit, int) or limit < 1:
            return self._json(handler, 400, {"error": "limit must be a positive integer"})
        self.max_limit_seen = max(self.max_limit_seen, limit)
        if self.mode == "wrong_types":
            return self._json(handler, 200, {"data": {"oops": 1}, "count": "x"})
        if limit > MAX_SCORED_LIMIT:  # the real server's silent fallback
            found = [m for m in self.memories if query.lower() in m.text.lower()][:limit]
            data = [{**wire_node(m), "score": 0} for m in found]
        else:
            filters = {k: body[k] for k in ("type", "subtype", "time_range", "cluster_ids") if k in body}
            try:
                parsed = Filters.model_validate(filters)
            except ValidationError as exc:
                return self._json(handler, 400, {"error": str(exc.errors()[0]["msg"])})
            hits = self._scored(query, limit, parsed, body.get("lifecycle"))
            data = [{**wire_node(memory), "score": score, "primary_signal": "keyword",
                     "breakdown": {"keyword": score}} for memory, score in hits]
        payload: dict[str, Any] = {"data": data, "count": len(data), "metrics": {"seed_count": len(data)}}
        if data:
            payload["qcs"] = {"query_type": "LOOKUP", "disqualified": False}
        return self._json(handler, 200, payload)


    def _scored(self, query: str, limit: int, filters: Filters, lifecycle: Any) -> list[tuple[Memory, float]]:
        """The real server's search: a one-sided time range ignored, lifecycle
        compared case-sensitively, scores drifting with each node's accesses."""
        time_range = filters.time_range
        if time_range is not None and (time_range.start is None or time_range.end is None):
            filters = filters.model_copy(update={"time_range": None})
        hits = self.backend.search(query, len(self.memories) or 1, filters)
        if lifecycle is not None:
            hits = [h for h in hits if h.memory.state_lifecycle == lifecycle]
        scored = []
        with self._lock:
            for hit in hits[:limit]:
                seen = self.accesses.get(hit.id, 0)
                self.accesses[hit.id] = seen + 1
                scored.append((hit.memory, round(min(1.0, hit.score + min(MAX_DRIFT, seen * DRIFT_PER_ACCESS)), 6)))
        return sorted(scored, key=lambda pair: -pair[1])


def wire_node(memory: Memory) -> dict[str, Any]:
    """A node as the real server sends it: fields a node was created without are
    ``null`` (not absent, not ""), and it carries fields Ferret does not use."""
    node: dict[str, Any] = memory.model_dump(mode="json", exclude={"memory_section"})
    for name in ("content_body", "content_summary", "temporal_event_time", "provenance_created_at", "subtype",
                 "state_lifecycle"):
        node[name] = node.get(name) or None
    node.update(embedding_vector=None, temporal_event_start=None, temporal_event_end=None,
                neural_stability=0.5, neural_retrievability=0.9, layer="semantic", version=1,
                memory_section=(memory.memory_section or section_for_subtype(memory.subtype)).value)
    return node


def nous_env(fake: FakeNous, timeout_seconds: float | None = None) -> dict[str, str]:
    """Environment that points a worker's ``nous`` backend at ``fake``."""
    env = {"FERRET_BACKEND__KIND": "nous", "FERRET_BACKEND__NOUS__BASE_URL": fake.base_url}
    if timeout_seconds is not None:
        env["FERRET_BACKEND__NOUS__TIMEOUT_SECONDS"] = f"{timeout_seconds:g}"
    return env
