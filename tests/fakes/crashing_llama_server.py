"""A stand-in for a llama.cpp server built for another CPU: it lists its model on ``GET /v1/models``, then dies
by SIGILL (as an illegal instruction kills the real one) on its first ``POST /v1/chat/completions``.
Run as ``python crashing_llama_server.py PORT``."""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "qwen2.5-coder-1.5b-instruct"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        signal.signal(signal.SIGILL, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGILL)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), _Handler).serve_forever()
