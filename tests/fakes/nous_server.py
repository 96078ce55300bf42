"""A fake Nous memory server on loopback, faithful to the real one's quirks.

- ``POST /v1/search`` answers ``{data, count, metrics, qcs}``; ``qcs`` is left
  out when there are no results;
- a ``limit`` above 33 falls back silently to an unscored substring match
  (items carry ``score: 0``) -- the client must never ask for that;
- errors: 400/404 as JSON ``{"error": ...}``; unhandled ones as
  ``500 text/plain``;
- ``POST /v1/classify-query`` answers a QCS-like object.
Scores come from the same lexical index as the local backend ([0, 1], not
max-normalised). ``mode`` injects faults: ``error500``, ``garbage`` (invalid
JSON), ``wrong_types``, ``slow`` (sleeps ``delay`` seconds).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from worker.backends.memory import InMemoryBackend
from worker.pipeline.records import Filters, Memory

MAX_SCORED_LIMIT = 33


class FakeNous:
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
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                fake._handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", kind)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer

    def _json(self, handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        self._send(handler, status, json.dumps(payload).encode(), "application/json")

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
        except ValueError:
            return self._json(handler, 400, {"error": "invalid JSON body"})
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
        if handler.path == "/v1/classify-query":
            return self._json(handler, 200, {"query": body.get("query"), "disqualified": False,
                                             "disqualifier_category": None, "query_type": "LOOKUP",
                                             "confidence": 0.8, "entity": None, "attribute": None})
        return self._json(handler, 404, {"error": f"no route {handler.path}"})

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
            data = [{**m.model_dump(mode="json"), "score": 0} for m in found]
        else:
            filters = {k: body[k] for k in ("type", "subtype", "lifecycle", "time_range", "cluster_ids") if k in body}
            try:
                parsed = Filters.model_validate(filters)
            except ValidationError as exc:
                return self._json(handler, 400, {"error": str(exc.errors()[0]["msg"])})
            hits = self.backend.search(query, limit, parsed)
            data = [{**h.memory.model_dump(mode="json"), "score": h.score, "primary_signal": "keyword"}
                    for h in hits]
        payload: dict[str, Any] = {"data": data, "count": len(data), "metrics": {"seed_count": len(data)}}
        if data:
            payload["qcs"] = {"query_type": "LOOKUP", "disqualified": False}
        return self._json(handler, 200, payload)
