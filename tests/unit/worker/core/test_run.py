"""The job core: settings in a forked work horse, the trace of an unexpected
failure, trace ids owned by one job, and the tenant binding."""

from __future__ import annotations

import json
import os
import time

import fakeredis
import pytest

from ferret.errors import JobRefused
from ferret.job_ids import job_id_for
from ferret.settings import load_settings
from ferret.worker.core import run as run_module
from ferret.worker.core.resources import build_resources
from ferret.worker.core.results import REFUSAL_LOG
from ferret.worker.core.run import run_job


@pytest.fixture
def ctx():
    client = fakeredis.FakeRedis()
    return build_resources(load_settings(environ={"FERRET_PIPELINE__MAX_RESULTS": "3"}), client)


def _payload(query: str = "BTC thesis", **request) -> dict:
    now = time.time()
    return {"request": {"query": query, **request}, "enqueued_at": now, "deadline_at": now + 5}


def test_a_forked_work_horse_keeps_the_parents_settings(ctx, monkeypatch):
    assert ctx.for_this_process() is ctx
    monkeypatch.setattr(ctx, "name", f"{ctx.name.rsplit(':', 1)[0]}:{os.getpid() + 1}")  # as after a fork
    rebuilt = ctx.for_this_process(ctx.client)
    assert rebuilt is not ctx and rebuilt.name.endswith(f":{os.getpid()}")
    assert rebuilt.settings.pipeline.max_results == 3  # not the environment's default (20)


def test_an_unexpected_failure_keeps_the_trace_naming_the_stage(ctx, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a stage")

    monkeypatch.setattr(run_module, "run_pipeline", broken)
    job_id = job_id_for("default", None)
    result = run_job(ctx, _payload(), job_id).result
    assert result.status == "failed" and "internal error: RuntimeError" in (result.error or "")
    trace = ctx.results.trace(result.trace_id)
    assert trace is not None and trace["job_id"] == job_id
    failing = [s for s in trace["spans"] if s["status"] == "ERROR"]
    assert "pipeline" in [s["name"] for s in failing]


def test_a_trace_id_already_taken_moves_to_a_new_id(ctx):
    first = run_job(ctx, _payload(), job_id_for("default", None)).result
    before = ctx.results.trace(first.trace_id)
    stolen = {**_payload(), "trace_id": first.trace_id}
    second = run_job(ctx, stolen, job_id_for("default", None)).result
    assert second.status == "ok" and second.trace_id != first.trace_id
    assert ctx.results.trace(first.trace_id) == before
    moved = ctx.results.trace(second.trace_id)
    assert moved["job_id"] == second.job_id and {s["trace_id"] for s in moved["spans"]} == {second.trace_id}


def test_a_payload_under_another_requests_id_is_not_run_and_writes_nothing_under_it(ctx):
    victim = job_id_for("tenant-b", "r1")
    with pytest.raises(JobRefused) as refused:
        run_job(ctx, _payload(namespace="tenant-a", request_id="r1"), victim)
    assert refused.value.reason == "tenant_mismatch"
    assert not ctx.results.exists(victim) and ctx.results.read(victim) is None  # tenant-b's request may still run
    logged = json.loads(ctx.client.lindex(REFUSAL_LOG, 0))
    assert logged["job_id"] == victim and logged["reason"] == "tenant_mismatch"


def test_an_invalid_payload_is_refused_not_answered(ctx):
    victim = job_id_for("tenant-b", "r2")
    with pytest.raises(JobRefused) as refused:
        run_job(ctx, {"request": {"query": ""}, "enqueued_at": 1.0, "deadline_at": 2.0}, victim)
    assert refused.value.reason == "malformed_job" and "query" in refused.value.message
    assert not ctx.results.exists(victim)


def test_an_orchestration_bug_falls_back_to_a_plain_search_and_is_not_cached(ctx, monkeypatch):
    from ferret.records import Memory
    from ferret.worker.backends.local import MemoryStore
    from ferret.worker.pipeline import orchestrator

    MemoryStore(ctx.client, "default").upsert([Memory(id="t1", content_title="BTC thesis halving")])

    def broken(*args, **kwargs):
        raise ValueError("a bug in merge")

    monkeypatch.setattr(orchestrator, "merge_and_select", broken)
    result = run_job(ctx, _payload(), job_id_for("default", None)).result
    assert result.status == "partial" and [r.id for r in result.results] == ["t1"]
    assert result.stats.fallback == "ok" and "ValueError" in (result.stats.fallback_cause or "")
    names = [s["name"] for s in ctx.results.trace(result.trace_id)["spans"]]
    assert "fallback" in names
    monkeypatch.undo()
    again = run_job(ctx, _payload(), job_id_for("default", None)).result
    assert again.status == "ok" and not again.stats.cache_hit and again.stats.fallback is None


def test_fallbacks_are_counted_by_outcome(ctx, monkeypatch):
    from ferret.worker.metrics import FerretMetrics
    from ferret.worker.pipeline import orchestrator

    def broken(*args, **kwargs):
        raise ValueError("a bug in merge")

    monkeypatch.setattr(orchestrator, "merge_and_select", broken)
    metrics = FerretMetrics()
    metrics.record(run_job(ctx, _payload("anything at all"), job_id_for("default", None)).result, "local")
    assert metrics.registry.get_sample_value("ferret_fallbacks_total", {"outcome": "ok"}) == 1
    assert metrics.registry.get_sample_value("ferret_fallbacks_total", {"outcome": "failed"}) == 0


def test_a_late_run_whose_result_is_not_kept_says_so(ctx, caplog):
    job_id = job_id_for("default", None)
    first = run_job(ctx, _payload(), job_id)
    assert not first.dropped
    late = run_job(ctx, _payload(), job_id)  # the same job run again (its worker was taken for lost)
    assert late.dropped and late.trace is None
    assert ctx.results.read(job_id).trace_id == first.result.trace_id  # the first result stays
    assert "this result is dropped" in caplog.text
