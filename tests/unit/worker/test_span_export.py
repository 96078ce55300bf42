from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ferret.contract import RetrievalResult, Timestamps
from ferret.settings import TracingSettings
from ferret.worker.core.report import JobReport
from ferret.worker.span_export import SpanExport

TRACE = {"trace_id": "0af7651916cd43dd8448eb211c80319c", "job_id": "fr-x", "spans": [
    {"name": "job", "span_id": "b7ad6b7169203331", "parent_span_id": None, "start_time_unix_nano": 1_000,
     "end_time_unix_nano": 9_000, "attributes": {"queue": "prefetch", "skip": None}, "status": "OK"},
    {"name": "search", "span_id": "00f067aa0ba902b7", "parent_span_id": "b7ad6b7169203331",
     "start_time_unix_nano": 2_000, "end_time_unix_nano": 5_000,
     "attributes": {"index": 1, "sub": ["a", "b"], "odd": {"k": 1}, "error": "BackendError: down"},
     "status": "ERROR"},
]}


def _report(trace):
    result = RetrievalResult(job_id="fr-x", namespace="n", queue="prefetch", status="ok",
                             timestamps=Timestamps(enqueued_at=0, deadline_at=1))
    return JobReport(result, None, trace)


def test_a_stored_trace_becomes_sdk_spans_with_ids_parents_times_and_status():
    memory = InMemorySpanExporter()
    export = SpanExport(TracingSettings(otlp_endpoint="http://unused", service_name="svc"), "w1", exporter=memory)
    export(_report(TRACE))
    export(_report(None))  # a job with no trace exports nothing
    export.shutdown()
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"job", "search"}
    job, search = spans["job"], spans["search"]
    assert format(job.context.trace_id, "032x") == TRACE["trace_id"] and job.parent is None
    assert format(search.parent.span_id, "016x") == "b7ad6b7169203331"
    assert (search.start_time, search.end_time) == (2_000, 5_000)
    assert dict(job.attributes) == {"queue": "prefetch"}  # None is not an OpenTelemetry value: left out
    assert list(search.attributes["sub"]) == ["a", "b"] and search.attributes["odd"] == "{'k': 1}"
    assert search.status.status_code is StatusCode.ERROR and search.status.description == "BackendError: down"
    assert job.resource.attributes["service.name"] == "svc" and job.resource.attributes["service.instance.id"] == "w1"
