"""Every job's spans to an OTLP endpoint (Jaeger, Grafana Tempo, a Collector),
through the OpenTelemetry SDK.

The job records its spans with Ferret's own recorder (``ferret.tracing``:
2.3 us a span, where the SDK's tracer takes 22 us, which on a ~15-span job
would cost more than the whole pipeline's overhead) and writes them to Redis
with its result. When ``tracing.otlp_endpoint`` is set, a worker observer
turns the stored trace into SDK ``ReadableSpan``s and hands them to the
SDK's ``BatchSpanProcessor`` with its OTLP/HTTP exporter: batching, retries
and the protocol are the SDK's, and the export runs in its background
thread, after the result is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ferret.errors import ConfigError
from ferret.settings import TracingSettings
from ferret.worker.core.report import JobReport

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

_SCOPE = "ferret"


def _attribute(value: Any) -> Any:
    """An OpenTelemetry attribute value: primitives as they are, the rest as text."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return str(value)


def readable_spans(trace: dict[str, Any], resource: Any) -> Iterator[ReadableSpan]:
    """The spans of a stored trace document as SDK spans (ids, parents, times,
    attributes and status kept)."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    scope = InstrumentationScope(_SCOPE)
    trace_id = int(trace["trace_id"], 16)

    def context(span_id: str) -> SpanContext:
        return SpanContext(trace_id, int(span_id, 16), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    for span in trace.get("spans", []):
        attributes = {key: _attribute(value) for key, value in (span.get("attributes") or {}).items()
                      if value is not None}
        failed = span.get("status") == "ERROR"
        yield ReadableSpan(
            name=span["name"], context=context(span["span_id"]),
            parent=context(span["parent_span_id"]) if span.get("parent_span_id") else None,
            resource=resource, attributes=attributes, kind=SpanKind.INTERNAL,
            status=Status(StatusCode.ERROR, str(attributes.get("error", ""))) if failed else Status(StatusCode.OK),
            start_time=int(span["start_time_unix_nano"]), end_time=int(span["end_time_unix_nano"]),
            instrumentation_scope=scope,
        )


class SpanExport:
    """A worker observer: each finished job's spans into the SDK's batch processor."""

    def __init__(self, settings: TracingSettings, worker_name: str | None = None,
                 exporter: SpanExporter | None = None) -> None:
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:  # pragma: no cover - the SDK is a dependency; the exporter an extra
            raise ConfigError("tracing.otlp_endpoint needs the OpenTelemetry SDK: "
                              "pip install 'ferret-memory[otlp]'") from exc
        if exporter is None:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise ConfigError("tracing.otlp_endpoint needs the OTLP exporter: "
                                  "pip install 'ferret-memory[otlp]'") from exc
            exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint, timeout=int(settings.otlp_timeout_seconds))
        resource_attributes = {"service.name": settings.service_name}
        if worker_name:
            resource_attributes["service.instance.id"] = worker_name
        self.resource = Resource.create(resource_attributes)
        self.processor = BatchSpanProcessor(exporter)

    def __call__(self, report: JobReport) -> None:
        if not report.trace:
            return
        for span in readable_spans(report.trace, self.resource):
            self.processor.on_end(span)

    def shutdown(self) -> None:
        """Export what is queued, then stop the background thread."""
        self.processor.shutdown()
