"""What a job leaves in Redis: Ferret's result and trace, packed; nothing of
RQ's for a success; traces sampled when a setting asks."""

from __future__ import annotations

import time

import pytest
from rq.job import Job

from ferret import keys
from ferret.bench.footprint import measure
from ferret.errors import JobNotFound
from ferret.packed import MARK, unpack


def _rq_done_with(redis_client, job_id: str) -> None:
    deadline = time.monotonic() + 10  # RQ ends its side just after the job wrote Ferret's result
    while Job.exists(job_id, connection=redis_client) and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_prefetch_job_leaves_its_packed_result_and_trace_and_nothing_of_rq(
        worker_class, producer, sample_namespace, start_workers, redis_client):
    start_workers(1, "--worker-class", worker_class)
    handle = producer.enqueue({"query": "funding squeeze playbook", "namespace": sample_namespace})
    result = producer.wait(handle, 20)
    assert result is not None and result.status == "ok" and result.results
    stored = redis_client.get(keys.result(handle.job_id))
    assert stored.startswith(MARK) and len(stored) < len(result.model_dump_json())
    trace = producer.trace(handle)
    assert trace is not None and trace["job_id"] == handle.job_id and trace["spans"]
    assert redis_client.get(keys.trace(result.trace_id)).startswith(MARK)
    cached = [redis_client.get(key) for key in redis_client.scan_iter(keys.cached(sample_namespace, "*"))]
    assert cached and all(value.startswith(MARK) for value in cached)
    again = producer.wait(producer.enqueue({"query": "funding squeeze playbook", "namespace": sample_namespace}), 20)
    assert again is not None and again.stats.cache_hit and again.results == result.results  # read back from the cache
    for key in redis_client.scan_iter(keys.cached(sample_namespace, "*")):
        redis_client.set(key, MARK + b"not zlib")  # a corrupt entry is a miss, and is written afresh
    third = producer.wait(producer.enqueue({"query": "funding squeeze playbook", "namespace": sample_namespace}), 20)
    assert third.status == "ok" and not third.stats.cache_hit and third.results == result.results
    assert all(unpack(redis_client.get(key), 1 << 20).startswith(b"{")
               for key in redis_client.scan_iter(keys.cached(sample_namespace, "*")))
    _rq_done_with(redis_client, handle.job_id)
    assert not Job.exists(handle.job_id, connection=redis_client)
    assert not list(redis_client.scan_iter("rq:results:*"))
    assert not redis_client.zcard("rq:finished:prefetch")


def test_trace_sampling_keeps_the_traces_of_jobs_that_did_not_end_ok(producer, sample_namespace, start_workers,
                                                                     redis_client):
    start_workers(1, extra_env={"FERRET_TRACING__REDIS_SAMPLE_RATE": "0"})
    ok = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    expired = producer.enqueue({"query": "SOL trade", "namespace": sample_namespace, "deadline_seconds": 0.001})
    assert producer.wait(ok, 20).status == "ok"
    assert producer.wait(expired, 20).status == "expired"
    with pytest.raises(JobNotFound, match="not sampled"):
        producer.trace(ok)
    assert producer.trace(expired)["job_id"] == expired.job_id


def test_the_footprint_benchmark_counts_ferret_keys_and_no_rq_result_streams(redis_server):
    figures = measure(jobs=40)
    per_job = figures["bytes_per_job"]
    assert per_job["ferret result"] > 0 and per_job["ferret trace"] > 0
    assert "rq result stream" not in per_job and "rq job hash" not in per_job
    assert figures["total_without_capped"] == sum(v for k, v in per_job.items() if k != "ferret cache (capped)")
