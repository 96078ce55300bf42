"""Spans to an OTLP endpoint: real workers of both classes export every
job's spans, through the OpenTelemetry SDK's OTLP/HTTP exporter, to a fake
receiver speaking the protocol on loopback; the spans are the ones stored in
Redis with the result."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ferret.worker.fakes.otlp_collector import FakeOtlpCollector

COMPOUND = "What's my BTC thesis and how did my last SOL trade go?"


@pytest.fixture
def collector():
    fake = FakeOtlpCollector()
    yield fake
    fake.close()


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_each_jobs_spans_reach_the_otlp_endpoint(env, producer, sample_namespace, collector, worker_class):
    handles = [producer.enqueue({"query": q, "namespace": sample_namespace, "queue": "batch",
                                 "options": {"cache": False}}) for q in (COMPOUND, "funding squeeze playbook")]
    worker = subprocess.run(
        [sys.executable, "-m", "ferret.cli.main", "worker", "batch", "--burst", "-q", "--worker-class", worker_class],
        env={**env, "FERRET_TRACING__OTLP_ENDPOINT": collector.traces_url,
             "FERRET_TRACING__SERVICE_NAME": "ferret-test"}, capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0, worker.stderr
    for handle in handles:
        stored = producer.trace(handle)
        exported = collector.wait_for(stored["trace_id"], len(stored["spans"]))
        key = ("name", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano")
        assert sorted(tuple(s[k] for k in key) for s in exported) == \
            sorted(tuple(s[k] for k in key) for s in stored["spans"])
        assert {s["resource"]["service.name"] for s in exported} == {"ferret-test"}
        assert {s["scope"] for s in exported} == {"ferret"}
        job = next(s for s in exported if s["name"] == "job")
        assert job["parent_span_id"] is None and job["attributes"]["namespace"] == sample_namespace
    names = {s["name"] for s in collector.spans}
    assert {"job", "queue_wait", "pipeline", "search", "search.sub_query", "merge", "result_write"} <= names


def test_no_endpoint_no_export(env, producer, sample_namespace, collector):
    producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    worker = subprocess.run([sys.executable, "-m", "ferret.cli.main", "worker", "batch", "--burst", "-q"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0 and collector.requests == 0
