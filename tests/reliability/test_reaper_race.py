"""A job that ends while the reaper judges it is not taken for a dead worker's.

A forking worker writes a job's execution record first and its work horse stamps the job with the worker's
name after, so the reaper asks the record whose an unstamped job is. When the job ends between the reaper's
look for its result and its look at the record, the record is gone with the job's success, as a dead
worker's expires: the reaper used to re-queue the job, which then ran twice. The job's end takes its
started-registry entry out in the same transaction as the record, so an entry the reaper can no longer take
out is a job that ended. Real redis-server."""

from __future__ import annotations

import time

from rq import Queue
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from ferret.rq_layer import reaper
from ferret.worker.core.resources import build_resources


def _started_unstamped(producer, redis_client, namespace: str):
    """A batch job taken off its queue by a forking worker and started (its started-registry entry names an
    execution record, none written), not yet stamped with the worker's name: its handle, queue and entry."""
    handle = producer.enqueue({"query": "BTC thesis", "namespace": namespace, "queue": "batch",
                               "deadline_seconds": 600})
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    queue.remove(handle.job_id)
    entry = f"{handle.job_id}:execution-1"
    redis_client.zadd(StartedJobRegistry(queue=queue).key, {entry: time.time() + 600})
    return handle, queue, entry


def test_a_job_that_ends_while_the_reaper_looks_at_its_record_is_left_alone(producer, redis_client, settings,
                                                                             sample_namespace, monkeypatch):
    handle, queue, entry = _started_unstamped(producer, redis_client, sample_namespace)
    registry_key = StartedJobRegistry(queue=queue).key
    looked = []
    real = reaper._worker_of

    def ended_meanwhile(ctx, judged, raw):  # the job's success lands just as the reaper reads the record
        looked.append(raw)
        redis_client.zrem(registry_key, raw)
        return real(ctx, judged, raw)

    monkeypatch.setattr(reaper, "_worker_of", ended_meanwhile)
    ctx = build_resources(settings, redis_client)
    assert reaper.reap(ctx, [queue]) == []
    assert looked == [entry.encode()]  # the record was looked at: gone, as a dead worker's is
    assert redis_client.lrange(queue.key, 0, -1) == []  # not queued again
    assert Job.fetch(handle.job_id, connection=redis_client, serializer=JSONSerializer).meta.get(reaper.RERUNS) is None
    assert producer.result(handle) is None  # nor ended failed


def test_an_unstamped_job_whose_record_is_gone_is_still_a_dead_workers(producer, redis_client, settings,
                                                                       sample_namespace):
    """The other side: with its entry still there, the same job is re-run (its worker died)."""
    handle, queue, _ = _started_unstamped(producer, redis_client, sample_namespace)
    ctx = build_resources(settings, redis_client)
    assert reaper.reap(ctx, [queue]) == []
    assert redis_client.lrange(queue.key, 0, -1) == [handle.job_id.encode()]  # back at the front of its queue
    assert Job.fetch(handle.job_id, connection=redis_client, serializer=JSONSerializer).meta[reaper.RERUNS] == 1
