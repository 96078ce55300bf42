"""A fake OTLP/HTTP trace receiver (what Jaeger, Tempo and the Collector
serve on :4318): ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest`` (gzip when the client says so), answered 200
with an ``ExportTraceServiceResponse``; anything else 404, an undecodable
body 400, as the Collector does. Received spans are kept as plain dicts."""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ferret.worker.fakes.loopback import LoopbackServer

PROTOBUF = "application/x-protobuf"


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class FakeOtlpCollector(LoopbackServer):
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        self._lock = threading.Lock()
        super().__init__()

    @property
    def traces_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1/traces"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.command != "POST" or handler.path != "/v1/traces":
            return self._send(handler, 404, b"404 page not found", "text/plain")
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if handler.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except DecodeError:
            return self._send(handler, 400, b"bad request", "text/plain")
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append({
                        "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano,
                        "attributes": {a.key: _value(a.value) for a in span.attributes},
                        "status_code": span.status.code, "resource": resource, "scope": scope_spans.scope.name,
                    })
        with self._lock:
            self.requests += 1
            self.spans.extend(received)
        self._send(handler, 200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)

    def wait_for(self, trace_id: str, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The spans of ``trace_id`` once at least ``count`` arrived (or what arrived by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                found = [s for s in self.spans if s["trace_id"] == trace_id]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.05)
