"""RQ bookkeeping with fewer round trips: skipped only when it repeats itself."""

from __future__ import annotations

import signal

import fakeredis
import pytest
import redis
from rq import Queue, SimpleWorker, get_current_job
from rq.exceptions import StopRequested
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.suspension import resume, suspend

from ferret.rq_layer import bookkeeping
from ferret.rq_layer.bookkeeping import COALESCE_SECONDS, CoalescedBookkeeping, LeanQueue, OneTripJobStart


class LeanWorker(CoalescedBookkeeping, SimpleWorker):
    pass


class OneTripWorker(OneTripJobStart, CoalescedBookkeeping, SimpleWorker):
    pass


def records_while_running() -> dict[str, object]:
    """What Redis says about the running job, read from inside it."""
    job = get_current_job()
    assert job is not None and job.worker_name is not None
    client = job.connection
    worker_key = f"rq:worker:{job.worker_name}"
    executions = client.zrange(f"rq:executions:{job.id}", 0, -1)
    state = client.hget(worker_key, "state")
    return {
        "job": {k: client.hget(job.key, k) is not None for k in ("last_heartbeat", "started_at", "worker_name")},
        "status": job.get_status(refresh=True),
        "in_started_registry": [key.split(":")[0] == job.id for key in job.started_job_registry.get_job_ids()],
        "execution_hashes": [client.exists(f"rq:execution:{job.id}:{e.decode()}") for e in executions],
        "worker": {"state": state.decode()},
        "worker_expires": client.ttl(worker_key) > 0,
    }


def current_job_id() -> str:
    job = get_current_job()
    assert job is not None
    return job.id


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(bookkeeping.time, "monotonic", clock)
    return clock


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


@pytest.fixture
def worker(client: fakeredis.FakeRedis) -> LeanWorker:
    queue = LeanQueue("q", connection=client, serializer=JSONSerializer)
    return LeanWorker([queue], connection=client, serializer=JSONSerializer, worker_ttl=16)


def test_a_heartbeat_repeated_within_the_window_is_skipped(worker, client, clock):
    worker.heartbeat()
    assert client.ttl(worker.key) == 16 + 60  # RQ's default, in one round trip
    client.hdel(worker.key, "last_heartbeat")
    clock.now += COALESCE_SECONDS / 2
    worker.heartbeat()
    assert not client.hexists(worker.key, "last_heartbeat")
    clock.now += COALESCE_SECONDS
    worker.heartbeat()
    assert client.hexists(worker.key, "last_heartbeat")


def test_a_heartbeat_that_changes_the_expiry_or_rides_a_pipeline_is_sent(worker, client, clock):
    worker.heartbeat()
    worker.heartbeat(5)  # shortens the expiry: sent at once
    assert 0 < client.ttl(worker.key) <= 5
    worker.heartbeat()  # extends it again by far more than the window
    assert client.ttl(worker.key) == 16 + 60
    client.hdel(worker.key, "last_heartbeat")
    with client.pipeline() as pipe:
        worker.heartbeat(pipeline=pipe)
        pipe.execute()
    assert client.hexists(worker.key, "last_heartbeat")


def test_a_state_is_not_written_twice_in_a_row(worker, client):
    worker.set_state("idle")
    client.hset(worker.key, "state", "tampered")
    worker.set_state("idle")
    assert client.hget(worker.key, "state") == b"tampered"
    worker.set_state("busy")
    assert client.hget(worker.key, "state") == b"busy"
    with client.pipeline() as pipe:
        worker.set_state("idle", pipeline=pipe)
        pipe.execute()
    client.hset(worker.key, "state", "tampered")
    worker.set_state("idle")  # a pipelined write is not trusted to have happened
    assert client.hget(worker.key, "state") == b"idle"


def test_suspension_is_noticed_within_the_window(worker, client, clock):
    worker.check_for_suspension(burst=True)
    suspend(client)
    worker.check_for_suspension(burst=True)  # read just now: not read again yet
    clock.now += COALESCE_SECONDS
    with pytest.raises(StopRequested):
        worker.check_for_suspension(burst=True)
    resume(client)
    clock.now += COALESCE_SECONDS
    worker.check_for_suspension(burst=True)


@pytest.mark.parametrize("lean", [True, False], ids=["ferret-queue", "plain-queue"])
def test_a_success_is_saved_whole_and_only_ferret_jobs_skip_the_watch(client, clock, monkeypatch, lean):
    queue = (LeanQueue if lean else Queue)("q", connection=client, serializer=JSONSerializer)
    worker = LeanWorker([queue], connection=client, serializer=JSONSerializer, worker_ttl=16)
    worker.register_birth()
    job = queue.enqueue_call(current_job_id)
    watched: list[tuple[object, ...]] = []
    real_watch = redis.client.Pipeline.watch
    monkeypatch.setattr(redis.client.Pipeline, "watch",
                        lambda pipe, *names: watched.append(names) or real_watch(pipe, *names))
    clock.now += 100  # the idle heart-beat below is due again
    worker.execute_job(job, queue)
    assert bool(watched) is not lean
    job = Job.fetch(job.id, connection=client, serializer=JSONSerializer)
    assert job.get_status() == "finished" and job.return_value() == job.id
    assert job.id in queue.finished_job_registry and job.id not in queue.started_job_registry
    assert job.ended_at is not None and job.last_heartbeat is not None
    assert client.hget(worker.key, "state") == b"idle"
    assert client.hget(worker.key, "successful_job_count") == b"1"
    # Ferret's: idle again, RQ's long expiry sent with the success (RQ's way
    # leaves the job's expiry, 180 + 60 s, until the loop's next heart-beat)
    assert client.ttl(worker.key) == (16 + 60 if lean else 180 + 60)


def test_a_stop_signal_while_the_success_is_written_is_a_warm_shutdown(worker, client, monkeypatch):
    queue = worker.queues[0]
    worker.register_birth()
    job = queue.enqueue_call(current_job_id)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # RQ re-arms handlers: keep pytest's
    real_execute = redis.client.Pipeline.execute

    def execute(pipe, *args, **kwargs):
        if any("successful_job_count" in command for command, _ in pipe.command_stack):
            worker.request_stop(signal.SIGTERM, None)  # SIGTERM lands as the success goes out
        return real_execute(pipe, *args, **kwargs)

    monkeypatch.setattr(redis.client.Pipeline, "execute", execute)
    worker.execute_job(job, queue)  # an idle worker would raise StopRequested here
    assert worker._stop_requested
    assert job.get_status(refresh=True) == "finished"
    assert worker.get_state() == "idle" and client.hget(worker.key, "state") == b"idle"


def run_one_job(cls: type, client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch,
                queues: int) -> tuple[dict[str, object], list[int]]:
    """One job through a burst worker: what it saw of Redis, and the size of each transaction sent."""
    queue_list = [LeanQueue(f"{cls.__name__}{i}", connection=client, serializer=JSONSerializer)
                  for i in range(queues)]
    worker = cls(queue_list, connection=client, serializer=JSONSerializer, worker_ttl=16)
    queue_list[0].enqueue_call(records_while_running)
    sent: list[int] = []
    real_execute = redis.client.Pipeline.execute
    monkeypatch.setattr(redis.client.Pipeline, "execute",
                        lambda pipe, *a, **kw: (pipe.command_stack and sent.append(len(pipe.command_stack)))
                        or real_execute(pipe, *a, **kw))  # an empty pipeline sends nothing
    assert worker.work(burst=True, with_scheduler=False)
    monkeypatch.undo()
    finished = queue_list[0].finished_job_registry.get_job_ids()
    assert len(finished) == 1
    assert client.llen(queue_list[0].intermediate_queue_key) == 0
    job = Job.fetch(finished[0], connection=client, serializer=JSONSerializer)
    return job.return_value(), sent


@pytest.mark.parametrize("queues", [1, 2], ids=["one-queue", "two-queues"])
def test_a_job_starts_in_one_transaction_with_the_records_rq_writes_in_two(client, monkeypatch, queues):
    one_trip, one_trip_sent = run_one_job(OneTripWorker, client, monkeypatch, queues)
    rq_way, rq_sent = run_one_job(LeanWorker, client, monkeypatch, queues)
    assert one_trip == rq_way
    assert one_trip["status"] == "started" and one_trip["worker"]["state"] == "busy"
    assert one_trip["execution_hashes"] == [1]
    assert one_trip["in_started_registry"] == [True] and all(one_trip["job"].values())
    assert len(one_trip_sent) == len(rq_sent) - 1  # one transaction fewer, nothing else changed


@pytest.mark.parametrize("lean", [True, False], ids=["ferret-queue", "plain-queue"])
def test_a_success_kept_for_no_time_leaves_nothing_and_the_lean_way_reads_nothing(client, clock, monkeypatch, lean):
    queue = (LeanQueue if lean else Queue)("q", connection=client, serializer=JSONSerializer)
    worker = LeanWorker([queue], connection=client, serializer=JSONSerializer, worker_ttl=16)
    worker.register_birth()
    job = queue.enqueue_call(current_job_id, result_ttl=0)
    sent: list[object] = []
    real_send = redis.client.Redis.execute_command
    monkeypatch.setattr(redis.client.Redis, "execute_command",
                        lambda self, *args, **kw: sent.append(args[0]) or real_send(self, *args, **kw))
    worker.execute_job(job, queue)
    monkeypatch.undo()
    assert not [key for key in client.scan_iter() if job.id.encode() in key]  # hash, result stream, executions
    assert job.id not in queue.finished_job_registry and job.id not in queue.started_job_registry
    assert client.hget(worker.key, "successful_job_count") == b"1"
    if lean:  # RQ's delete reads the job's status and its executions first, outside the transaction
        assert "HGET" not in sent and "ZRANGE" not in sent, sent
