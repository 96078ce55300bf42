"""A fake OpenAI-compatible embeddings server on loopback.

``POST /v1/embeddings`` with ``{model, input}`` (a string or a list of
strings) answers ``{object: "list", data: [{object: "embedding", index,
embedding}], model, usage}`` as OpenAI, Ollama and vLLM do; an empty input
is a 400 JSON error. The vectors stand in for a model's: every word falls in
one of ``dimensions`` slots by a stable hash, except the words of a concept
(``concepts``), which share one, so "automobile" is near "car" and no word
of one is in the other. ``mode``: ``error500`` (``500 text/plain``),
``wrong_shape`` (no ``data``), ``slow`` (sleeps ``delay`` seconds).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

from ferret.worker.fakes.loopback import LoopbackServer

CONCEPTS = (("car", "automobile", "vehicle", "sedan"), ("dog", "puppy", "hound"), ("sell", "sold", "selling"),
            ("paris", "france", "french"), ("doctor", "physician", "clinic"))


class FakeEmbeddings(LoopbackServer):
    def __init__(self, dimensions: int = 256, concepts: Iterable[Iterable[str]] = CONCEPTS) -> None:
        self.dimensions = dimensions
        self.concept_of = {word: i for i, words in enumerate(concepts) for word in words}
        self.mode = "ok"
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        super().__init__()

    def vector(self, text: str) -> list[float]:
        row = [0.0] * self.dimensions
        concepts = len(set(self.concept_of.values()))
        for word in re.findall(r"\w+", text.lower()):
            concept = self.concept_of.get(word)
            digest = int(hashlib.sha256(word.encode()).hexdigest()[:8], 16)
            # concepts first, then hashed words, the last slot shared by every text
            slot = concept if concept is not None else concepts + digest % (self.dimensions - concepts - 1)
            row[slot] += 1.0
        row[-1] += 0.05  # every text a little alike, as a model's are
        return row

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            body = json.loads(handler.rfile.read(length) or b"{}")
        except ValueError:
            return self._json(handler, 400, {"error": {"message": "invalid JSON"}})
        self.requests.append(body)
        if handler.path != "/v1/embeddings":
            return self._json(handler, 404, {"error": {"message": f"no route {handler.path}"}})
        if self.mode == "slow":
            time.sleep(self.delay)
        if self.mode == "error500":
            return self._send(handler, 500, b"Internal Server Error", "text/plain")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._json(handler, 400, {"error": {"message": "input must be a string or a list of strings"}})
        if self.mode == "wrong_shape":
            return self._json(handler, 200, {"embeddings": [self.vector(t) for t in texts]})
        data = [{"object": "embedding", "index": i, "embedding": self.vector(t)} for i, t in enumerate(texts)]
        return self._json(handler, 200, {"object": "list", "data": data, "model": body.get("model"),
                                         "usage": {"prompt_tokens": 0, "total_tokens": 0}})
