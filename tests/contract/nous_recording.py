"""Recording a real Nous server's answers, and replaying them.

``RecordingProxy`` stands between the contract tests and a live server and
keeps every exchange; ``save`` writes them as JSON. ``ReplayServer`` answers
from such a file: a request is looked up by method, path (with its query) and
JSON body (keys sorted), and the answers recorded for it are given in the
order they were recorded, the last one again once they run out. A request
that was never recorded gets a 599 naming it, so a change in what Ferret
sends fails the tests until the recording is made again
(``ops/nous/record_twin.py``).
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx

from ferret.worker.fakes.loopback import LoopbackServer

FORMAT = 1


def request_key(method: str, path: str, body: str) -> str:
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True) if body else ""
    except ValueError:
        canonical = body
    return f"{method} {path} {canonical}"


def _read(handler: BaseHTTPRequestHandler) -> str:
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length).decode("utf-8", errors="replace")


class RecordingProxy(LoopbackServer):
    def __init__(self, target: str) -> None:
        """``target``: the live server's base URL, ``.../v1``."""
        self._target = httpx.Client(base_url=target.rstrip("/").removesuffix("/v1"), timeout=30.0)
        self.exchanges: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        super().__init__()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = _read(handler)
        headers = {"Content-Type": "application/json"} if body else {}
        answer = self._target.request(handler.command, handler.path, content=body.encode() or None, headers=headers)
        with self._lock:
            self.exchanges.append({"method": handler.command, "path": handler.path, "body": body,
                                   "status": answer.status_code,
                                   "content_type": answer.headers.get("content-type", ""),
                                   "answer": answer.text})
        self._send(handler, answer.status_code, answer.content, answer.headers.get("content-type", "text/plain"))

    def save(self, path: Path, server: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {"format": FORMAT, "server": server, "exchanges": self.exchanges}
        path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    def close(self) -> None:
        super().close()
        self._target.close()


class ReplayServer(LoopbackServer):
    def __init__(self, recording: Path) -> None:
        document = json.loads(recording.read_text(encoding="utf-8"))
        if document.get("format") != FORMAT:
            raise ValueError(f"{recording}: recording format {document.get('format')!r}, expected {FORMAT}")
        self.server_name = str(document.get("server", "?"))
        self._answers: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for exchange in document["exchanges"]:
            self._answers[request_key(exchange["method"], exchange["path"], exchange["body"])].append(exchange)
        self._lock = threading.Lock()
        self.unrecorded: list[str] = []
        super().__init__()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        key = request_key(handler.command, handler.path, _read(handler))
        with self._lock:
            queue = self._answers.get(key)
            exchange = (queue.popleft() if len(queue) > 1 else queue[0]) if queue else None
            if exchange is None:
                self.unrecorded.append(key)
        if exchange is None:
            message = f"not in the recording: {key} (record again: ops/nous/record_twin.py)"
            return self._json(handler, 599, {"error": message})
        self._send(handler, exchange["status"], exchange["answer"].encode("utf-8"), exchange["content_type"])
