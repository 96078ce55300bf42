import threading

from ferret.tracing import SpanCollector


def test_spans_nest_per_thread_and_carry_otel_fields():
    tracer = SpanCollector()
    with tracer.span("job") as root:
        tracer.root_span_id = root.span_id
        with tracer.span("pipeline") as pipeline, tracer.span("search") as search:
            def in_thread() -> None:
                with tracer.span("sub", parent=search.span_id), tracer.span("inner"):
                    pass
            worker = threading.Thread(target=in_thread)
            worker.start()
            worker.join()
    spans = {s.name: s for s in tracer.spans}
    assert spans["pipeline"].parent_span_id == root.span_id
    assert spans["search"].parent_span_id == pipeline.span_id
    assert spans["sub"].parent_span_id == search.span_id
    assert spans["inner"].parent_span_id == spans["sub"].span_id, "each thread nests its own spans"
    exported = spans["search"].to_dict()
    assert len(exported["trace_id"]) == 32 and len(exported["span_id"]) == 16
    assert exported["end_time_unix_nano"] >= exported["start_time_unix_nano"]


def test_span_count_is_capped():
    tracer = SpanCollector(max_spans=10)
    for i in range(25):
        with tracer.span(f"s{i}"):
            pass
    assert len(tracer.spans) == 10 and tracer.dropped == 15


def test_errors_mark_the_span():
    tracer = SpanCollector()
    try:
        with tracer.span("boom"):
            raise ValueError("bad")
    except ValueError:
        pass
    (span,) = tracer.spans
    assert span.status == "ERROR" and "ValueError: bad" in span.attributes["error"]
