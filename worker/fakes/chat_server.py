"""A fake OpenAI-compatible chat completions server on loopback.

``POST /v1/chat/completions`` reads the numbered snippets out of the prompt
(``[n] text``) and scores each 10 if it contains one of ``favourite`` words,
else 1, answering ``{"scores": [{"id": n, "score": s}, ...]}`` inside a
chat completion. ``mode`` injects what real endpoints do:

- ``ok``: plain JSON; ``think``: a ``<think>`` block before fenced JSON;
- ``prose``: sloppy JSON (trailing comma, single quotes) inside prose;
- ``positional``: a bare list of numbers; ``unclosed_think``: never leaves <think>;
- ``malformed``: prose with no scores; ``wrong_shape``: not a chat completion;
- ``error500``: ``500 text/plain``; ``error401``: JSON error;
- ``slow``: sleeps ``delay`` seconds before answering; ``trickle``: sends
  headers, then one byte every ``delay`` seconds.
"""

from __future__ import annotations

import json
import re
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from ferret.worker.fakes.loopback import LoopbackServer

_SNIPPET = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


class FakeChat(LoopbackServer):
    protocol_version = "HTTP/1.1"

    def __init__(self, favourite: set[str] | None = None) -> None:
        self.favourite = {w.lower() for w in (favourite or set())}
        self.mode = "ok"
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        super().__init__()

    def scores_for(self, prompt: str) -> list[tuple[int, int]]:
        found = []
        for number, text in _SNIPPET.findall(prompt):
            words = set(re.findall(r"\w+", text.lower()))
            found.append((int(number), 10 if words & self.favourite else 1))
        return found

    def _content(self, prompt: str) -> str:
        scores = self.scores_for(prompt)
        as_json = json.dumps({"scores": [{"id": n, "score": s} for n, s in scores]})
        if self.mode == "think":
            return f"<think>\nThe user wants {{\"scores\": []}}... let me rate.\n</think>\n```json\n{as_json}\n```"
        if self.mode == "prose":
            items = ", ".join(f"{{'id': {n}, 'score': {s},}}" for n, s in scores)
            return f"Sure! Here are the ratings:\n{{'scores': [{items},]}}\nHope this helps."
        if self.mode == "positional":
            return json.dumps([s for _, s in scores])
        if self.mode == "unclosed_think":
            return "<think>\nSnippet 1 looks relevant, snippet 2 maybe {\"scores\": [9, 9]"
        if self.mode == "malformed":
            return "I cannot rate these snippets."
        return as_json

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", 0))
        body = json.loads(handler.rfile.read(length))
        self.requests.append(body)
        self.auth_headers.append(handler.headers.get("Authorization"))
        if handler.path != "/v1/chat/completions":
            self._send(handler, 404, b'{"error": "not found"}', "application/json")
            return
        if self.mode == "slow":
            time.sleep(self.delay)
        if self.mode == "error500":
            self._send(handler, 500, b"Internal Server Error", "text/plain")
            return
        if self.mode == "error401":
            self._send(handler, 401, b'{"error": {"message": "bad key"}}', "application/json")
            return
        if self.mode == "trickle":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "1000")
            handler.end_headers()
            try:
                for _ in range(1000):
                    time.sleep(self.delay)
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
            except OSError:  # the client gave up
                pass
            return
        prompt = body["messages"][-1]["content"]
        if self.mode == "wrong_shape":
            answer: dict[str, Any] = {"output": self._content(prompt)}
        else:
            answer = {"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": self._content(prompt)}}]}
        self._send(handler, 200, json.dumps(answer).encode(), "application/json")
