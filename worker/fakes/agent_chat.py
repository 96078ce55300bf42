"""A scripted OpenAI-compatible chat completions server on loopback, for
the agent loop: ``POST /v1/chat/completions`` answers each request with the
next scripted reply (a string, or a function of the request's messages),
shaped as a real chat completion. ``delay`` seconds before every answer
(a slow model); past the script, the answer is prose with no action (what
a confused model says). Like a real server, a reply ends before the first
of the request's ``stop`` strings (``finish_reason`` still ``stop``).
Requests are kept for the tests to read."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from ferret.worker.fakes.loopback import LoopbackServer

Reply = str | Callable[[list[dict[str, str]]], str]


class ScriptedChat(LoopbackServer):
    protocol_version = "HTTP/1.1"

    def __init__(self, script: Sequence[Reply] = ()) -> None:
        self.script = list(script)
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self._lock = threading.Lock()
        super().__init__()

    def prompts(self) -> list[str]:
        """The last message of each request, in order."""
        return [r["messages"][-1]["content"] for r in self.requests]

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length))
        if handler.path != "/v1/chat/completions":
            return self._send(handler, 404, b'{"error": {"message": "not found"}}', "application/json")
        with self._lock:
            self.requests.append(body)
            self.auth_headers.append(handler.headers.get("Authorization"))
            reply = self.script.pop(0) if self.script else "I am not sure what to do here."
        if self.delay:
            time.sleep(self.delay)
        content = reply(body["messages"]) if callable(reply) else reply
        stops = body.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            content = content.split(stop, 1)[0]
        self._json(handler, 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })
