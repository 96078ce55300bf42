"""The real-model tests check the model: pointed at a server that lists its model but drops every completion
(as a llama.cpp build killed by SIGILL on its first request does), all three fail; none passes by falling back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


class _DeadOnCompletion(BaseHTTPRequestHandler):
    """``GET /v1/models`` answers; ``POST /v1/chat/completions`` closes the connection unanswered."""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "qwen2.5-coder-1.5b-instruct", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self) -> None:
        self.close_connection = True
        self.connection.close()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_every_real_model_test_fails_when_the_server_cannot_generate():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DeadOnCompletion)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-m", "real_llm", "tests/real_llm", "-p", "no:cacheprovider", "-q",
             "-o", "addopts="],
            cwd=ROOT, env={**os.environ, "REAL_LLM_URL": url}, capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 failed" in run.stdout and "passed" not in run.stdout.splitlines()[-1], run.stdout[-3000:]
