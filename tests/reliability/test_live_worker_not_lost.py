"""A live worker is never taken for a dead one (ferret.rq_layer.job_pulse).

A job that runs longer than its worker key's TTL (here: a backend that
answers after 9 s, a TTL of 5 s, no re-runs allowed) ends ``ok`` from the
worker that ran it; before the job's pulse a simple worker's ended
``failed``, "worker lost", at the other worker's reaper. A worker starved of
CPU (stopped and continued, running a tenth of the time) keeps its key too.
Past its deadline, a live worker's job ends as overrun, a dead one's as
lost."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from ferret.worker.fakes.nous_server import FakeNous, nous_env

TTL = "5"


def _env(fake: FakeNous) -> dict[str, str]:
    return {**nous_env(fake, timeout_seconds=60), "FERRET_SERVICE__WORKER_TTL_SECONDS": TTL,
            "FERRET_SERVICE__MAX_RERUNS": "0", "FERRET_PIPELINE__TIMEOUT_SECONDS": "60"}


def _duty_cycle(pid: int, stop: threading.Event, running: float = 0.05, stopped: float = 0.45) -> None:
    """The process runs a tenth of the time: a machine whose CPU is taken by others."""
    while not stop.is_set():
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stopped)
        os.kill(pid, signal.SIGCONT)
        time.sleep(running)
    os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_job_longer_than_the_key_ttl_is_not_lost(worker_class, producer, start_workers, sample_nous):
    sample_nous.slow_first, sample_nous.delay = 1, 9.0
    start_workers(1, "--worker-class", worker_class, extra_env=_env(sample_nous))
    start_workers(1, extra_env=_env(sample_nous))  # the other worker, whose reaper would take the job for lost
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 40})
    result = producer.wait(handle, 60)
    assert result is not None and result.status == "ok", (result.status, result.error) if result else None
    assert sample_nous.requests, "the job went through the slow backend"


def test_a_starved_worker_keeps_its_job(producer, start_workers, sample_nous, redis_client):
    sample_nous.slow_first, sample_nous.delay = 1, 9.0
    (starved,) = start_workers(1, extra_env=_env(sample_nous))
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 40})
    while not sample_nous.requests:  # the starved worker holds the job, in its slow search
        time.sleep(0.01)
    start_workers(1, extra_env=_env(sample_nous))  # a healthy worker, whose reaper judges the starved one
    stop = threading.Event()
    cycler = threading.Thread(target=_duty_cycle, args=(starved.pid, stop), daemon=True)
    cycler.start()
    try:
        result = producer.wait(handle, 60)
    finally:
        stop.set()
        cycler.join()
    assert result is not None and result.status == "ok", (result.status, result.error) if result else None


@pytest.mark.parametrize("alive", [True, False])
def test_past_its_deadline_a_live_workers_job_is_overrun_a_dead_ones_lost(alive, producer, redis_client, settings,
                                                                          sample_namespace):
    from rq import Queue
    from rq.job import Job
    from rq.registry import StartedJobRegistry
    from rq.serializers import JSONSerializer

    from ferret.rq_layer.reaper import OVERRAN, reap
    from ferret.worker.core.resources import build_resources

    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch",
                               "deadline_seconds": 2})
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    job = Job.fetch(handle.job_id, connection=redis_client, serializer=JSONSerializer)
    queue.remove(job.id)  # what a worker's dequeue and start do: the job is on a worker, in the started registry
    job.worker_name = "busy-worker"
    job.save()
    redis_client.zadd(StartedJobRegistry(queue=queue).key, {job.id: time.time() + 60})
    if alive:
        redis_client.hset("rq:worker:busy-worker", "state", "busy")
    ctx = build_resources(settings, redis_client)
    reap(ctx, [queue], now=ctx.now() + settings.service.hard_timeout_grace_seconds + 10)
    result = producer.result(handle)
    assert result is not None and result.status == "failed"
    if alive:
        assert result.error == OVERRAN
    else:
        assert result.error == "worker lost while running the job (deadline passed)"
