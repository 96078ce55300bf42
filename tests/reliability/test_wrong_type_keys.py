"""RQ keys of the wrong Redis type are said once each and set aside, not met
with an ERROR and a traceback at every pass; entries a started registry
keeps for jobs that have finished (``<id>:<execution>`` of a job that ran
elsewhere) are cleaned. Real redis-server, real worker processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ferret import keys
from ferret.rq_layer.key_types import SET_ASIDE_PREFIX
from tests.conftest import ROOT


@contextmanager
def _worker(env: dict, worker_class: str, log: Path, maintenance_seconds: int) -> Iterator[subprocess.Popen]:
    """A ``ferret worker`` of both queues writing to ``log``, its maintenance every ``maintenance_seconds``;
    stopped after."""
    with log.open("w") as sink:
        worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", worker_class],
                                  env={**env, "FERRET_SERVICE__MAINTENANCE_INTERVAL_SECONDS": str(maintenance_seconds)},
                                  cwd=ROOT, stderr=sink, stdout=sink)
        try:
            yield worker
        finally:
            worker.terminate()
            worker.wait(timeout=30)


PLANTED = {"rq:finished:prefetch": "set", "rq:wip:batch": "set", "rq:queue:prefetch:intermediate": "hset"}


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_wrong_type_keys_are_said_once_and_set_aside_and_stale_entries_cleaned(
        worker_class, env, producer, sample_namespace, redis_client, tmp_path):
    waiting = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})  # for the worker to come
    for key, how in PLANTED.items():
        if how == "set":
            redis_client.set(key, "not a sorted set")
        else:
            redis_client.hset(key, "a", "hash")
    log = tmp_path / "worker.log"
    with _worker(env, worker_class, log, maintenance_seconds=1) as worker:
        assert producer.wait(waiting, 30).status == "ok"
        first = producer.enqueue({"query": "SOL trade", "namespace": sample_namespace})
        assert producer.wait(first, 30).status == "ok"
        stale = f"{first.job_id}:0123456789abcdef"  # its execution's entry, left in another queue's registry
        redis_client.zadd("rq:wip:batch", {stale: time.time()})
        time.sleep(5)  # several reaper and maintenance passes
        assert redis_client.zscore("rq:wip:batch", stale) is None
        assert producer.wait(producer.enqueue({"query": "ETH", "namespace": sample_namespace}), 30).status == "ok"
        assert worker.poll() is None
    text = log.read_text()
    for key in PLANTED:
        assert text.count(f"{key} held a Redis") == 1, text
        assert redis_client.exists(SET_ASIDE_PREFIX + key) and redis_client.ttl(SET_ASIDE_PREFIX + key) > 0
    assert "Traceback" not in text and " ERROR " not in text, text
    assert redis_client.exists(keys.result(first.job_id))


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_an_intermediate_queue_turned_to_another_type_while_served_stops_nothing(
        worker_class, env, producer, sample_namespace, redis_client, tmp_path):
    """A worker of both queues moves what it takes into the queue's intermediate queue until the job's start.
    That key made a hash while the worker serves (maintenance far off): the take pops without moving, the
    start takes nothing out, the key is set aside once, and every job ends ``ok`` on the same worker."""
    log = tmp_path / "worker.log"
    with _worker(env, worker_class, log, maintenance_seconds=600) as worker:
        assert producer.wait(producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace,
                                               "queue": "batch"}), 30).status == "ok"
        redis_client.hset("rq:queue:batch:intermediate", "a", "hash")
        handles = producer.enqueue_many([{"query": f"SOL trade {i}", "namespace": sample_namespace,
                                          "queue": "batch"} for i in range(20)])
        assert [producer.wait(handle, 30).status for handle in handles] == ["ok"] * 20
        assert worker.poll() is None
    text = log.read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
    assert text.count("rq:queue:batch:intermediate held a Redis") <= 1, text


def test_an_intermediate_queue_turned_to_another_type_between_take_and_start_stops_nothing(
        producer, redis_client, settings, sample_namespace, caplog):
    """Between a trip's take and its start, the intermediate queue that holds the taken entries is replaced by
    a hash: the start's removal of the entries fails, the rest of its transaction stands (the three jobs are
    started, so a worker lost now loses none: the next one's reaper runs them, each ``ok``), and the key is
    set aside."""
    from rq import Queue

    from ferret.rq_layer.reaper import LOCK_KEY
    from ferret.rq_layer.runner import build_worker

    handles, worker, (job, _), intermediate = _trip_taken_then_its_intermediate_queue_made_a_hash(
        producer, redis_client, settings, sample_namespace)
    worker.prepare_execution(job)  # the trip's start: all three
    assert Queue("batch", connection=redis_client).started_job_registry.count == 3
    assert redis_client.exists(SET_ASIDE_PREFIX + intermediate) and not redis_client.exists(intermediate)
    redis_client.delete(worker.key, LOCK_KEY)  # lost now; the reaper's lock (its own pass's) gone too
    build_worker(redis_client, settings, ["prefetch", "batch"]).work(burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 3  # type: ignore[union-attr]


def test_jobs_taken_with_a_trip_go_back_when_their_intermediate_queue_turned_to_another_type(
        producer, redis_client, settings, sample_namespace):
    """A worker stopping before it started the jobs taken with its trip puts them back at the front of their
    queue, in order. Their intermediate queue, replaced by a hash meanwhile, holds none of them: the put-back
    leaves it to the maintenance pass and raises nothing (it raised WRONGTYPE after the entries were back)."""
    handles, worker, (job, queue), intermediate = _trip_taken_then_its_intermediate_queue_made_a_hash(
        producer, redis_client, settings, sample_namespace)
    worker.queue_class.held.appendleft((job, queue))  # the job in hand goes back too, first
    worker.put_back_held()
    assert redis_client.lrange(queue.key, 0, -1) == [handle.job_id.encode() for handle in handles]
    assert redis_client.hgetall(intermediate) == {b"a": b"hash"}


def _trip_taken_then_its_intermediate_queue_made_a_hash(producer, redis_client, settings, sample_namespace):
    """Three batch jobs enqueued and taken in one trip by a worker of both queues (not started); then their
    queue's intermediate queue, which holds the three entries, replaced by a hash. The handles, the worker,
    the job in hand with its queue, and the intermediate queue's key."""
    from rq import Queue

    from ferret.rq_layer.runner import build_worker

    handles = producer.enqueue_many([{"query": f"BTC thesis {i}", "namespace": sample_namespace,
                                      "queue": "batch", "deadline_seconds": 600} for i in range(3)])
    worker = build_worker(redis_client, settings, ["prefetch", "batch"])
    worker.queue_class.take_up_to = 3
    worker.register_birth()
    taken = worker.dequeue_job_and_maintain_ttl(None)
    intermediate = Queue("batch", connection=redis_client).intermediate_queue_key
    assert redis_client.llen(intermediate) == 3
    redis_client.delete(intermediate)
    redis_client.hset(intermediate, "a", "hash")
    return handles, worker, taken, intermediate
