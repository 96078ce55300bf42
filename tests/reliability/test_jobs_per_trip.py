"""Several jobs per round trip (``ferret.rq_layer.trip_batching``): a deep queue is taken and ended a batch
at a time, every job still ends once, and a stop or a death in the middle of a batch loses no job."""

from __future__ import annotations

import pytest
from rq import Queue
from rq.serializers import JSONSerializer

from ferret.rq_layer.reaper import LOCK_KEY
from ferret.rq_layer.runner import build_worker

JOBS = 200


def _requests(namespace: str, count: int, tag: str = "") -> list[dict]:
    return [{"query": f"BTC thesis {tag}{i}", "namespace": namespace, "queue": "batch", "deadline_seconds": 600}
            for i in range(count)]


def _rq_keys_left(redis_client) -> list[str]:
    """What RQ keeps of jobs and executions (a success leaves nothing: ``bookkeeping.forget_job``)."""
    return sorted(key.decode() for pattern in ("rq:job:*", "rq:execution*", "rq:executions:*")
                  for key in redis_client.scan_iter(pattern))


def _transactions(redis_client) -> int:
    return int(redis_client.info("commandstats").get("cmdstat_exec", {}).get("calls", 0))


def test_a_deep_queue_is_served_several_jobs_a_trip_and_each_job_ends_once(producer, start_workers, redis_client,
                                                                            sample_namespace):
    """Against the same worker taking one job a trip (its start: a transaction a job; its success rides in
    its result's script), a deep queue costs far fewer transactions than jobs; every job has its one ``ok``
    result and RQ's records are left as a one-a-trip worker leaves them."""
    seen = {}
    for per_trip in (1, 16):
        handles = producer.enqueue_many(_requests(sample_namespace, JOBS, f"{per_trip}-"))
        redis_client.config_resetstat()
        worker, = start_workers(1, "batch", "--burst",
                                extra_env={"FERRET_SERVICE__JOBS_PER_TRIP": str(per_trip)}, wait=False)
        assert worker.wait(timeout=300) == 0
        seen[per_trip] = _transactions(redis_client)
        results = producer.results_of(handles)
        assert [r.status for r in results] == ["ok"] * JOBS, per_trip  # type: ignore[union-attr]
        queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
        assert queue.count == 0 and queue.started_job_registry.count == 0
        assert redis_client.llen(queue.intermediate_queue_key) == 0
        assert _rq_keys_left(redis_client) == [], per_trip
    assert seen[1] >= JOBS, seen
    assert seen[16] < JOBS / 4, seen


def test_a_stop_between_jobs_of_a_batch_puts_the_rest_back_in_order(producer, redis_client, settings,
                                                                     sample_namespace):
    """The loop stops (here ``--max-jobs``; a SIGTERM stops it at the same place) after two jobs of a batch
    of six: the four held go back to the front of the queue, in their order, their starts undone; the next
    worker serves them."""
    handles = producer.enqueue_many(_requests(sample_namespace, 6))
    ids = [h.job_id for h in handles]  # type: ignore[union-attr]
    worker = build_worker(redis_client, settings, ["batch"])
    worker.queue_class.take_up_to = 6  # the first trip takes all six (the worker sizes later trips itself)
    worker.work(burst=True, max_jobs=2, with_scheduler=False)
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert queue.job_ids == ids[2:]
    assert [queue.fetch_job(job_id).get_status() for job_id in ids[2:]] == ["queued"] * 4
    assert queue.started_job_registry.count == 0 and redis_client.llen(queue.intermediate_queue_key) == 0
    assert not list(redis_client.scan_iter("rq:execution*"))
    assert [r is not None for r in producer.results_of(handles)] == [True, True, False, False, False, False]
    build_worker(redis_client, settings, ["batch"]).work(burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 6  # type: ignore[union-attr]
    assert _rq_keys_left(redis_client) == []


def test_a_worker_lost_in_the_middle_of_a_batch_loses_no_job(producer, redis_client, settings, sample_namespace):
    """A worker takes four jobs in one trip, starts them, and dies before running any (its key gone, as
    when it is killed and its TTL passes): every taken job is in the started registry under its name, so
    the next worker's reaper runs them all again, and each ends once, ``ok``."""
    handles = producer.enqueue_many(_requests(sample_namespace, 4))
    lost = build_worker(redis_client, settings, ["batch"])
    lost.queue_class.take_up_to = 4
    lost.register_birth()
    job, _ = lost.dequeue_job_and_maintain_ttl(None)
    lost.prepare_execution(job)
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert queue.count == 0 and queue.started_job_registry.count == 4
    redis_client.delete(lost.key, LOCK_KEY)  # its key expired; the reaper's lock (its own pass's) too
    survivor = build_worker(redis_client, settings, ["batch"])
    survivor.work(burst=True, with_scheduler=False)
    results = producer.results_of(handles)
    assert [r.status for r in results] == ["ok"] * 4  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
@pytest.mark.parametrize("taken_by", ["the take", "a blocking pop"])
def test_a_worker_of_both_queues_lost_between_taking_and_starting_loses_no_job(
        producer, redis_client, settings, sample_namespace, worker_class, taken_by):
    """A worker serving both queues (the default) takes jobs and dies before starting them: four in one trip
    (the take script), or one by a blocking pop from both queues (``BLPOP``, when the queues were empty at
    its last look). Either way the entries are in their queue's intermediate queue (RQ puts them there only
    for a worker of one queue), so the reaper's pass puts them back once they have been there 10 s, and each
    job ends once, ``ok``."""
    import time as clock

    from ferret.rq_layer.reaper import STRANDED_GRACE_SECONDS, reap
    from ferret.worker.core.resources import build_resources

    handles = producer.enqueue_many(_requests(sample_namespace, 4))
    lost = build_worker(redis_client, settings, ["prefetch", "batch"], worker_class=worker_class)
    lost.queue_class.take_up_to = 4
    lost.queue_class.look_first = taken_by == "the take"
    lost.register_birth()
    assert lost.dequeue_job_and_maintain_ttl(5) is not None  # taken, never started: the worker dies here
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    taken = 4 if taken_by == "the take" else 1
    assert queue.count == 4 - taken and queue.started_job_registry.count == 0
    assert redis_client.llen(queue.intermediate_queue_key) == taken
    redis_client.delete(lost.key)
    ctx = build_resources(settings, redis_client)
    now = clock.time()
    for seen_at in (now, now + STRANDED_GRACE_SECONDS + 1):  # first seen; then past the grace
        redis_client.delete(LOCK_KEY)
        reap(ctx, [queue], now=seen_at)
    assert sorted(queue.job_ids) == sorted(h.job_id for h in handles)  # type: ignore[union-attr]
    assert redis_client.llen(queue.intermediate_queue_key) == 0
    build_worker(redis_client, settings, ["prefetch", "batch"], worker_class=worker_class).work(
        burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 4  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0 and redis_client.llen(queue.intermediate_queue_key) == 0


def test_a_forking_worker_lost_between_its_start_and_its_work_horses_loses_no_job(
        producer, redis_client, settings, sample_namespace):
    """A forking worker writes a job's execution record (the started registry's entry names it), then forks
    a work horse that stamps the job with the worker's name. Cut off or killed between the two (seen: a
    worker cut off from Redis as its horse began), the job names no worker: the reaper takes its worker
    from the execution record, finds it dead once its key is gone, and runs the job again."""
    handle = producer.enqueue(_requests(sample_namespace, 1)[0])
    lost = build_worker(redis_client, settings, ["prefetch", "batch"], worker_class="fork")
    lost.register_birth()
    job, _ = lost.dequeue_job_and_maintain_ttl(None)
    lost.prepare_execution(job)  # the parent's half of the start; the horse never runs
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert queue.started_job_registry.count == 1 and not queue.fetch_job(job.id).worker_name
    redis_client.delete(lost.key, LOCK_KEY)  # its key expired; the reaper's lock (its own pass's) too
    build_worker(redis_client, settings, ["prefetch", "batch"]).work(burst=True, with_scheduler=False)
    assert producer.result(handle).status == "ok"  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0


def test_a_trip_runs_its_jobs_earliest_deadline_first(producer, redis_client, settings, sample_namespace):
    """A job already past its deadline runs first and ends ``expired`` at once; the others in deadline order
    (ties in queue order). So a held job never waits behind one with a later deadline, and the reaper
    (which ends a live worker's job a second past its deadline + grace as overrun) never takes a held job
    for an overrun one."""
    deadlines = [600, 60, 0.000001, 600, 30]
    handles = producer.enqueue_many([{**request, "deadline_seconds": seconds} for request, seconds
                                     in zip(_requests(sample_namespace, len(deadlines)), deadlines, strict=True)])
    worker = build_worker(redis_client, settings, ["batch"])
    worker.queue_class.take_up_to = len(deadlines)
    worker.work(burst=True, with_scheduler=False)
    results = producer.results_of(handles)
    assert [r.status for r in results] == ["ok", "ok", "expired", "ok", "ok"]  # type: ignore[union-attr]
    started = [r.timestamps.started_at for r in results]  # type: ignore[union-attr]
    assert sorted(range(len(deadlines)), key=lambda i: started[i]) == [2, 4, 1, 0, 3]


@pytest.mark.parametrize("worker_state", ["alive", "lost"])
def test_jobs_that_waited_in_a_trip_past_their_deadline_end_expired(producer, redis_client, settings,
                                                                  sample_namespace, worker_state):
    """A worker takes four jobs in one trip and starts them; the first (the earliest deadline, the one it
    runs) is still unfinished when every deadline (+ grace) has passed (an overloaded machine). The reaper
    ends that one as overrun (its worker alive) or lost (its worker gone); the three behind it never
    started: ``expired``, as the worker itself would end them, neither overrun nor lost."""
    from ferret.rq_layer.reaper import OVERRAN, WAITED, reap
    from ferret.worker.core.resources import build_resources

    requests = _requests(sample_namespace, 4)
    for i, request in enumerate(requests):
        request["deadline_seconds"] = 60 + i  # distinct deadlines, in order
    handles = producer.enqueue_many(requests)
    busy = build_worker(redis_client, settings, ["batch"])
    busy.queue_class.take_up_to = 4
    busy.register_birth()
    job, _ = busy.dequeue_job_and_maintain_ttl(None)
    assert job.id == handles[0].job_id  # the earliest deadline runs first
    busy.prepare_execution(job)
    redis_client.delete(LOCK_KEY)  # a reaper pass of its own, just now (at its start)
    if worker_state == "lost":
        redis_client.delete(busy.key)
    ctx = build_resources(settings, redis_client)
    written = reap(ctx, [Queue("batch", connection=redis_client, serializer=JSONSerializer)],
                   now=ctx.now() + 120)
    assert {result.job_id for result in written} == {handle.job_id for handle in handles}
    results = producer.results_of(handles)
    first, *behind = results
    assert first.status == "failed", (first.status, first.error)
    assert first.error == OVERRAN if worker_state == "alive" else "worker lost" in first.error
    assert [(r.status, r.error) for r in behind] == [("expired", WAITED)] * 3
