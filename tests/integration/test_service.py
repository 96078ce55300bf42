"""The queue service end to end: real Redis, real worker processes."""

from __future__ import annotations

import json
import time

import pytest
from rq import Queue, Worker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.suspension import resume, suspend

from ferret.contract import FINAL_STATUSES, JOB_FUNCTION
from ferret.errors import ResultTimeout
from ferret.producer.client import JobState
from ferret.worker.core.results import REFUSAL_LOG
from ferret.worker.fakes.nous_server import nous_env
from tests.timing import scaled

COMPOUND = "What's my BTC thesis and how did my last SOL trade go?"


def test_enqueue_to_result_with_trace(producer, sample_namespace, start_workers):
    start_workers(1)
    handle = producer.enqueue({"query": COMPOUND, "namespace": sample_namespace})
    result = producer.wait(handle, 20)
    assert result is not None and result.status == "ok"
    assert result.stats.was_decomposed and len(result.stats.sub_queries) == 2
    assert {item.sub_query for item in result.results} == {0, 1}
    assert {"m01", "m04"} <= {item.id for item in result.results}
    assert "[thesis · KNOWLEDGE]" in result.context
    trace = producer.trace(handle)
    names = [s["name"] for s in trace["spans"]]
    assert {"job", "queue_wait", "pipeline", "search", "search.sub_query", "merge", "result_write"} <= set(names)
    assert all(s["trace_id"] == trace["trace_id"] for s in trace["spans"])


def test_wait_raises_a_timeout_error_and_status_has_two_fields(producer, sample_namespace, start_workers):
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    started = time.monotonic()
    with pytest.raises(TimeoutError) as raised:
        producer.wait(handle, 0.5)
    assert 0.4 < time.monotonic() - started < 5
    assert isinstance(raised.value, ResultTimeout)
    assert (raised.value.job_id, raised.value.rq_state, raised.value.workers) == (handle.job_id, "queued", 0)
    assert str(raised.value) == (f"no final result for job {handle.job_id} after 0.5 s (RQ state queued; "
                                 "no worker is serving its queue)")
    assert producer.status(handle) == JobState(handle.job_id, None, "queued")
    start_workers(1)
    assert producer.wait(handle, 20).status == "ok"
    assert producer.status(handle).status == "ok"  # the result is final before RQ's own bookkeeping ends
    deadline = time.monotonic() + 10
    while producer.status(handle).rq_state is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert producer.status(handle) == JobState(handle.job_id, "ok", None)  # RQ keeps nothing of a success
    assert producer.status("fr-0123456789abcdef0123456789abcdef") == \
        JobState("fr-0123456789abcdef0123456789abcdef", None, None)


def test_same_request_id_is_one_job(producer, sample_namespace, start_workers, redis_client):
    first = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "request_id": "req-1"})
    second = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "request_id": "req-1"})
    assert first.job_id == second.job_id and second.duplicate
    assert Queue("prefetch", connection=redis_client).count == 1
    start_workers(1)
    assert producer.wait(first, 20).status == "ok"
    third = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "request_id": "req-1"})
    assert third.job_id == first.job_id and third.duplicate
    assert Queue("prefetch", connection=redis_client).count == 0


def test_job_started_after_its_deadline_expires_with_a_result(producer, sample_namespace, start_workers):
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "deadline_seconds": 0.05})
    time.sleep(0.3)
    start_workers(1)
    result = producer.wait(handle, 20)
    assert result.status == "expired" and result.results == []
    assert "after its deadline" in result.error


def test_malformed_payload_on_the_queue_fails_clearly_and_worker_keeps_serving(
        producer, sample_namespace, start_workers, redis_client):
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    bad = [
        queue.enqueue_call(JOB_FUNCTION, args=("not an object",)),
        queue.enqueue_call(JOB_FUNCTION, args=({"request": {"query": ""}, "enqueued_at": time.time(),
                                                "deadline_at": time.time() + 10},)),
        queue.enqueue_call(JOB_FUNCTION, args=({"request": {"query": "x", "namespace": "../etc"},
                                                "enqueued_at": time.time(), "deadline_at": time.time() + 10},)),
        queue.enqueue_call(JOB_FUNCTION, args=({"enqueued_at": "soon"},)),
    ]
    good = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    start_workers(1)
    assert producer.wait(good, 20).status == "ok"
    deadline = time.monotonic() + 10
    refused: dict[str, str] = {}
    while len(refused) < len(bad) and time.monotonic() < deadline:
        logged = map(json.loads, redis_client.lrange(REFUSAL_LOG, 0, -1))
        refused = {entry["job_id"]: entry["message"] for entry in logged}
        time.sleep(0.05)
    errors = [refused.get(job.id, "") for job in bad]  # refused, naming the field; no result under their ids
    assert "payload" in errors[0] and "query" in errors[1] and "namespace" in errors[2]
    assert "enqueued_at" in errors[3]
    assert all(producer.result(job.id) is None for job in bad)
    assert producer.wait(producer.enqueue({"query": "SOL", "namespace": sample_namespace}), 20).status == "ok"


def test_prefetch_is_served_before_batch(producer, sample_namespace, start_workers):
    batch = [producer.enqueue({"query": f"SOL trade {i}", "namespace": sample_namespace, "queue": "batch"})
             for i in range(15)]
    urgent = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "prefetch"})
    start_workers(1, "--burst", wait=False)
    urgent_result = producer.wait(urgent, 30)
    batch_results = [producer.wait(h, 30) for h in batch]
    assert all(r.status == "ok" for r in batch_results)
    later = [r for r in batch_results if r.timestamps.started_at > urgent_result.timestamps.started_at]
    assert len(later) == len(batch_results)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_rq_keeps_complete_records_of_workers_and_none_of_successful_jobs(producer, sample_namespace, start_workers,
                                                                           redis_client, worker_class):
    start_workers(1, "--worker-class", worker_class)
    handles = [producer.enqueue({"query": q, "namespace": sample_namespace}) for q in ("BTC thesis", COMPOUND)]
    assert [producer.wait(h, 30).status for h in handles] == ["ok", "ok"]
    deadline = time.monotonic() + 10  # RQ's own bookkeeping ends just after the result
    for handle in handles:
        while Job.exists(handle.job_id, connection=redis_client):
            assert time.monotonic() < deadline, f"job {handle.job_id} is still in RQ"
            time.sleep(0.05)
        assert not redis_client.exists(f"rq:results:{handle.job_id}")  # Ferret's result is the one record
    [name] = [worker.name for worker in Worker.all(connection=redis_client)]
    while (worker := Worker.find_by_key(f"rq:worker:{name}", connection=redis_client)).successful_job_count < 2 \
            or worker.get_state() != "idle":
        assert time.monotonic() < deadline, f"worker {worker.get_state()} after {worker.successful_job_count} jobs"
        time.sleep(0.05)
    assert worker.last_heartbeat is not None
    assert redis_client.ttl(worker.key) > 0


def test_a_suspended_worker_takes_no_job_until_resumed(producer, sample_namespace, start_workers, redis_client):
    suspend(redis_client)
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    [worker] = start_workers(1, "--burst", wait=False)
    assert worker.wait(timeout=30) == 0
    assert producer.result(handle) is None and Queue("prefetch", connection=redis_client).count == 1
    resume(redis_client)
    start_workers(1, "--burst", wait=False)
    assert producer.wait(handle, 30).status == "ok"


def test_forking_worker_class_runs_jobs(producer, sample_namespace, start_workers):
    start_workers(1, "--worker-class", "fork")
    handles = [producer.enqueue({"query": q, "namespace": sample_namespace}) for q in ("BTC thesis", COMPOUND)]
    assert [producer.wait(h, 30).status for h in handles] == ["ok", "ok"]


def test_deadline_returns_partial_when_one_sub_query_hangs(producer, start_workers, sample_nous):
    deadline = scaled(1.0)
    sample_nous.slow_terms, sample_nous.delay = {"sol"}, deadline + 4
    start_workers(1, extra_env=nous_env(sample_nous, timeout_seconds=60))
    handle = producer.enqueue({"query": COMPOUND, "deadline_seconds": deadline})
    result = producer.wait(handle, 20 + deadline)
    assert result.status == "partial", (result.status, result.error)
    assert result.results and {i.sub_query for i in result.results} == {0}
    late = result.timestamps.finished_at - result.timestamps.deadline_at
    assert late < scaled(1.0), f"finished {late:.3f}s after the deadline"


def test_hung_backend_is_cut_off_and_worker_survives(producer, start_workers, sample_nous):
    deadline = scaled(1.0)
    sample_nous.mode, sample_nous.delay = "slow", deadline + 4
    start_workers(1, extra_env=nous_env(sample_nous, timeout_seconds=60))
    handle = producer.enqueue({"query": "BTC thesis", "deadline_seconds": deadline})
    result = producer.wait(handle, 20 + deadline)
    assert result.status == "failed" and "timed out" in result.error, (result.status, result.error)
    sample_nous.mode = "ok"
    after = producer.enqueue({"query": "BTC thesis", "deadline_seconds": scaled(5.0)})
    assert producer.wait(after, 20).status == "ok"


def test_every_enqueued_request_ends_in_one_final_status(producer, sample_namespace, start_workers, redis_client):
    handles = []
    for i in range(60):
        queue = "batch" if i % 3 else "prefetch"
        query = COMPOUND if i % 4 == 0 else f"BTC thesis number {i}"
        handles.append(producer.enqueue({"query": query, "namespace": sample_namespace, "queue": queue,
                                         "request_id": f"load-{i}"}))
    start_workers(2)
    results = [producer.wait(h, 30) for h in handles]
    assert all(r is not None and r.status in FINAL_STATUSES for r in results)
    assert len({r.job_id for r in results}) == 60
    assert sum(r.status == "ok" for r in results) == 60


def test_a_job_whose_entry_left_the_queue_unstarted_is_enqueued_again(producer, sample_namespace, start_workers,
                                                                      redis_client):
    request = {"query": "BTC thesis", "namespace": sample_namespace, "request_id": "lost-1", "queue": "batch"}
    first = producer.enqueue(request)
    assert redis_client.lrem("rq:queue:batch", 1, first.job_id) == 1  # popped by a worker that never started it
    assert producer.status(first).rq_state == "queued"  # RQ still says so, and would for ever
    assert producer.status(first).status is None
    again = producer.enqueue(request)
    assert again.job_id == first.job_id and not again.duplicate, "enqueued again, not joined"
    start_workers(1)
    assert producer.wait(again, 20).status == "ok"
    assert producer.enqueue(request).duplicate, "with its result there, the same request is one job"


@pytest.mark.parametrize("request_id", ["vanished-1", None])
def test_a_waiting_producer_enqueues_again_a_job_a_failover_lost(producer, sample_namespace, start_workers,
                                                                 redis_client, request_id):
    """What a promoted replica that never got the enqueue looks like: no job hash, no queue entry."""
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch",
                               "request_id": request_id})
    assert redis_client.delete(f"rq:job:{handle.job_id}") == 1
    assert redis_client.lrem("rq:queue:batch", 1, handle.job_id) == 1
    start_workers(1)
    result = producer.wait(handle, 20)  # checks every redis.failover_check_seconds (2 s) that the job still exists
    assert result.status == "ok" and result.job_id == handle.job_id and result.trace_id == handle.trace_id
    assert result.timestamps.deadline_at == pytest.approx(handle.deadline_at, abs=0.01), "the same deadline"
