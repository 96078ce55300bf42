"""The plumbing every fake HTTP server in the tests shares: a threaded server
on a free loopback port, GET and POST handed to ``_handle``, and answers that
tolerate a client which already gave up (the timeout tests)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    protocol_version = "HTTP/1.0"

    def __init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = fake.protocol_version
            # headers and body go out in separate writes: without TCP_NODELAY a kept-alive
            # connection waits ~40 ms for the client's delayed ACK before the body (Nagle)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                fake._handle(self)

            def do_GET(self) -> None:
                fake._handle(self)

            def do_DELETE(self) -> None:
                fake._handle(self)

            def do_PATCH(self) -> None:
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

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", kind)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:  # the client gave up (a timeout test): nothing to answer
            pass

    def _json(self, handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        self._send(handler, status, json.dumps(payload).encode(), "application/json")
