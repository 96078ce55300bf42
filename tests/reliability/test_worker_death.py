"""A worker killed mid-job: the job is re-run, or ends failed, within a bounded time."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ferret.worker.fakes.nous_server import FakeNous, nous_env
from tests.timing import scaled

TTL = "5"  # seconds without a heartbeat before a worker counts as dead


def _env(fake: FakeNous) -> dict[str, str]:
    return {**nous_env(fake, timeout_seconds=30), "FERRET_SERVICE__WORKER_TTL_SECONDS": TTL}


def _worker_running(redis_client, job_id: str, timeout: float = 10) -> str:
    from rq.job import Job
    from rq.serializers import JSONSerializer

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.fetch(job_id, connection=redis_client, serializer=JSONSerializer)
        if job.worker_name and job.get_status() == "started":
            return job.worker_name
        time.sleep(0.05)
    raise AssertionError("the job never started")


def _pid_of(redis_client, worker_name: str) -> int:
    return int(redis_client.hget(f"rq:worker:{worker_name}", "pid"))


def test_killed_worker_job_is_rerun_by_another(producer, start_workers, redis_client, sample_nous):
    sample_nous.slow_first, sample_nous.delay = 1, 30.0  # the first search hangs; the re-run's is fast
    start_workers(2, extra_env=_env(sample_nous))
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 60})
    victim = _worker_running(redis_client, handle.job_id)
    while not sample_nous.requests:  # killed inside its (hung) search, not before it: the re-run's is fast
        time.sleep(0.01)
    killed_at = time.monotonic()
    os.kill(_pid_of(redis_client, victim), signal.SIGKILL)
    result = producer.wait(handle, 30)
    took = time.monotonic() - killed_at
    assert result is not None and result.status == "ok", (result.error if result else None)
    assert result.worker != victim.split(":")[0]
    assert took < scaled(12), f"re-run after {took:.1f}s"


def test_killed_worker_job_past_its_deadline_ends_failed(producer, start_workers, redis_client, sample_nous):
    """The victim's key is gone and the job's deadline (+ grace) has passed before any reaper looks: the
    job ends failed as lost, not re-run. (A reaper that looked while the dead worker's key still lived
    would, rightly, see a live worker overrunning; which of the two came first was a race on seconds.)"""
    from rq.job import Job
    from rq.serializers import JSONSerializer

    from ferret.envelope import deadline_of
    from ferret.redis_plumbing.clock import RedisClock

    sample_nous.slow_first, sample_nous.delay = 1, 30.0
    start_workers(1, extra_env=_env(sample_nous))
    handle = producer.enqueue({"query": "BTC thesis", "deadline_seconds": 2})
    victim = _worker_running(redis_client, handle.job_id)
    os.kill(_pid_of(redis_client, victim), signal.SIGKILL)
    job = Job.fetch(handle.job_id, connection=redis_client, serializer=JSONSerializer)
    deadline = deadline_of(job.args[0])
    assert deadline is not None
    overdue_at = deadline + 2.0 + 1  # hard_timeout_grace_seconds' default, + the reaper's 1 s
    until, clock = time.monotonic() + scaled(30), RedisClock(redis_client)
    while redis_client.exists(f"rq:worker:{victim}") or clock.time() <= overdue_at:
        assert time.monotonic() < until, "the victim's key never expired"
        time.sleep(0.1)
    start_workers(1, extra_env=_env(sample_nous), wait=False)  # its reaper judges the job: lost, overdue
    result = producer.wait(handle, scaled(30))
    assert result is not None and result.status == "failed"
    assert "worker lost" in result.error and "deadline passed" in result.error
    assert result.timestamps.finished_at >= overdue_at


def test_killed_work_horse_ends_failed_at_once(producer, start_workers, redis_client, sample_nous):
    sample_nous.slow_first, sample_nous.delay = 1, 30.0
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env=_env(sample_nous))
    handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 60})
    _worker_running(redis_client, handle.job_id)
    children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
    assert children, "the forking worker runs the job in a child"
    os.kill(int(children[0]), signal.SIGKILL)
    result = producer.wait(handle, 20)
    assert result is not None and result.status == "failed" and "work horse died" in result.error
    assert parent.poll() is None, "the worker itself survives"


def test_a_stop_between_dequeue_and_start_puts_the_job_back(producer, redis_client, settings, sample_namespace):
    """SIGTERM at an idle-looking worker raises StopRequested wherever it is; between taking a job
    off the queue and its start transaction that is before the job ran: it must not end failed."""
    from rq import Queue
    from rq.exceptions import StopRequested
    from rq.serializers import JSONSerializer

    from ferret.rq_layer.runner import build_worker

    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    for worker_class in ("simple", "fork"):
        worker = build_worker(redis_client, settings, ["batch"], worker_class)

        def stopped(*_args, **_kwargs):
            raise StopRequested()  # what RQ's handler raises at a worker that is not yet busy

        worker.prepare_execution = stopped  # type: ignore[method-assign]
        worker.work(burst=True)
        assert producer.result(handle) is None, f"{worker_class}: a job that never ran has no result"
        queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
        assert queue.job_ids == [handle.job_id], f"{worker_class}: back on its queue"
        assert redis_client.llen(queue.intermediate_queue_key) == 0
    build_worker(redis_client, settings, ["batch"]).work(burst=True)
    assert producer.wait(handle, 10).status == "ok"


def test_a_sigterm_between_dequeue_and_start_is_a_warm_shutdown(producer, redis_client, settings, sample_namespace):
    """The signal lands (RQ's handler runs) while the job's start transaction is being made: the job runs to
    its end, then the worker stops."""
    import signal as signals

    from ferret.rq_layer.runner import build_worker

    first = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    second = producer.enqueue({"query": "SOL trade", "namespace": sample_namespace, "queue": "batch"})
    for worker_class in ("simple", "fork"):
        worker = build_worker(redis_client, settings, ["batch"], worker_class)
        start = worker.prepare_execution

        def signalled(job, _start=start, _worker=worker):
            _worker.request_stop(signals.SIGTERM, None)  # what the kernel's SIGTERM would run here
            return _start(job)

        worker.prepare_execution = signalled  # type: ignore[method-assign]
        worker.work(burst=False)  # returns only because it was asked to stop
        done = [producer.result(h) for h in (first, second)]
        assert sum(r is not None for r in done) == (1 if worker_class == "simple" else 2), worker_class
        assert all(r.status == "ok" for r in done if r is not None)


def test_a_job_stranded_between_dequeue_and_start_is_put_back_within_seconds(producer, redis_client, settings,
                                                                           sample_namespace):
    """A worker that stopped (or died) after taking a job off the queue and before starting it leaves the
    job in RQ's intermediate queue: the reaper's pass puts it back once it has been there 10 s."""
    import time as clock

    from rq import Queue
    from rq.serializers import JSONSerializer

    from ferret.rq_layer.reaper import LOCK_KEY, STRANDED_GRACE_SECONDS, reap
    from ferret.rq_layer.runner import build_worker
    from ferret.worker.core.resources import build_resources

    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    redis_client.lmove(queue.key, queue.intermediate_queue_key, "LEFT", "RIGHT")  # what a worker's dequeue does
    assert queue.job_ids == [] and redis_client.lrange(queue.intermediate_queue_key, 0, -1) == [handle.job_id.encode()]
    ctx = build_resources(settings, redis_client)
    now = clock.time()
    reap(ctx, [queue], now=now)  # first seen
    redis_client.delete(LOCK_KEY)
    reap(ctx, [queue], now=now + STRANDED_GRACE_SECONDS / 2)  # still within the grace: a worker may be starting it
    assert queue.job_ids == []
    redis_client.delete(LOCK_KEY)
    reap(ctx, [queue], now=now + STRANDED_GRACE_SECONDS + 1)
    assert queue.job_ids == [handle.job_id] and redis_client.llen(queue.intermediate_queue_key) == 0
    build_worker(redis_client, settings, ["batch"]).work(burst=True)
    assert producer.wait(handle, 10).status == "ok"
