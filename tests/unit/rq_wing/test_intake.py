"""The worker's intake: only Ferret's own jobs come off a queue; every other
entry is refused (and reported) without importing or running anything."""

from __future__ import annotations

import time
import zlib

import fakeredis
import pytest
import redis
from rq import Callback, Queue
from rq.serializers import JSONSerializer

from ferret.contract import JOB_FUNCTION
from ferret.job_ids import job_id_for
from ferret.rq_layer.intake import Refusal, guarded_queue_class, refusal_of


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def _payload() -> dict:
    return {"request": {"query": "BTC"}, "enqueued_at": time.time(), "deadline_at": time.time() + 5}


def _queue(client, name="prefetch"):
    return Queue(name, connection=client, serializer=JSONSerializer)


def test_ferrets_job_is_accepted(client):
    job = _queue(client).enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    assert refusal_of(job, "prefetch") is None


@pytest.mark.parametrize(("func", "kwargs", "reason"), [
    ("os.system", {"args": ("touch x",)}, "not_ferret_job"),
    (JOB_FUNCTION, {"args": (_payload(),), "on_success": Callback("os.system")}, "not_ferret_job"),
    (JOB_FUNCTION, {"args": (_payload(),), "kwargs": {"x": 1}}, "bad_arguments"),
    (JOB_FUNCTION, {"args": ("text",)}, "bad_arguments"),
    (JOB_FUNCTION, {"args": ()}, "bad_arguments"),
])
def test_anything_else_is_refused(client, func, kwargs, reason):
    job = _queue(client).enqueue_call(func, **kwargs)
    refusal = refusal_of(job, "prefetch")
    assert refusal is not None and refusal.reason == reason


def test_a_job_on_another_queue_than_its_own_is_refused(client):
    job = _queue(client, "batch").enqueue_call(JOB_FUNCTION, args=(_payload(),))
    refusal = refusal_of(job, "prefetch")
    assert refusal is not None and refusal.reason == "malformed_job"


@pytest.mark.parametrize("lean", [True, False], ids=["one trip (lean)", "RQ's pop then read"])
def test_dequeue_skips_every_bad_entry_and_returns_the_next_good_job(client, lean):
    refused: list[Refusal] = []
    queue_class = guarded_queue_class(refused.append, lean)
    queue = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    good = queue.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    client.lrem(queue.key, 1, good.id)
    foreign = queue.enqueue_call("os.system", args=("touch x",))
    client.lrem(queue.key, 1, foreign.id)
    client.hset("rq:job:fr-" + "1" * 32, mapping={"origin": "prefetch", "data": zlib.compress(b"\xff")})
    client.rpush("rq:job:fr-" + "2" * 32, b"a list where a job hash should be")
    client.rpush(queue.key, b"bad.id", b"\xff", "fr-" + "0" * 32, "fr-" + "1" * 32, "fr-" + "2" * 32, foreign.id,
                 good.id)
    job, from_queue = queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer)
    assert job.id == good.id and from_queue.name == "prefetch"
    assert [r.reason for r in refused] == ["bad_id", "bad_id", "no_job_hash", "malformed_job", "malformed_job",
                                           "not_ferret_job"]
    assert refused[5].job is not None and refused[2].job_id == "fr-" + "0" * 32
    assert client.lrange(queue.key, 0, -1) == []
    # The refused entries are gone; the job taken waits in the intermediate queue until its start (the lean
    # take moves it there; RQ's own pop then read, with this server's version, does not).
    assert client.lrange(queue.intermediate_queue_key, 0, -1) == ([good.id.encode()] if lean else [])
    assert queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer) is None


def test_a_failing_refusal_hook_does_not_stop_the_dequeue(client):
    def broken(refusal: Refusal) -> None:
        raise RuntimeError("observer bug")

    queue_class = guarded_queue_class(broken)
    queue = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    good = queue.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    client.lpush(queue.key, b"bad.id")
    job, _ = queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer)
    assert job.id == good.id


@pytest.mark.parametrize("where", ["reading the hash", "reading the data"])
def test_a_stop_while_reading_an_entry_stops_the_worker_and_the_entry_goes_back(client, monkeypatch, where):
    """RQ's signal handler raises StopRequested wherever an idle worker is; reading an entry, it must not
    be taken for a bad entry (seen: a good job ended 'refused: job hash cannot be read (StopRequested)')."""
    from rq.exceptions import StopRequested
    from rq.job import Job

    refused: list[Refusal] = []
    queue_class = guarded_queue_class(refused.append)
    queue = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    good = queue.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    if where == "reading the hash":  # taken from the hash read with the entry (lean) or from RQ's read
        def stopped(*args, **kwargs):
            raise StopRequested()
        monkeypatch.setattr(Job, "restore", stopped)
    else:
        monkeypatch.setattr(JSONSerializer, "loads", staticmethod(lambda data: (_ for _ in ()).throw(StopRequested())))
    with pytest.raises(StopRequested):
        queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer)
    assert refused == [], "not a refusal: the job was fine"
    assert client.lrange(queue.key, 0, -1) == [good.id.encode()], "back at the front of its queue"
    assert client.lrange(queue.intermediate_queue_key, 0, -1) == []
    monkeypatch.undo()
    job, _ = queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer)
    assert job.id == good.id


def test_a_waiting_job_comes_off_the_queues_with_its_hash_in_one_round_trip(client):
    queue_class = guarded_queue_class(lambda refusal: None)
    prefetch = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    batch = queue_class("batch", connection=client, serializer=JSONSerializer)
    first = batch.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    good = batch.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None))
    assert queue_class.dequeue_any([prefetch, batch], 5, connection=client, serializer=JSONSerializer)[0].id == first.id
    sent: list[tuple] = []  # the script is loaded now
    original = client.execute_command

    def counted(*args, **kwargs):
        sent.append(args)
        return original(*args, **kwargs)

    client.execute_command = counted
    job, from_queue = queue_class.dequeue_any([prefetch, batch], 5, connection=client, serializer=JSONSerializer)
    assert job.id == good.id and from_queue.name == "batch" and job.args[0]["request"] == {"query": "BTC"}
    assert [args[0] for args in sent] == ["EVALSHA"]


# A blocking pop, then its entry's hash read with the queues' lengths: RQ's pop by the server's version, a
# BLMOVE into the intermediate queue, or a BLPOP whose entry is put there in the read's round trip.
POP_THEN_READ = ([["BLMOVE"], ["HGETALL", "LLEN"]], [["BLPOP"], ["RPUSH", "HGETALL", "LLEN"]])


def _round_trips(client, monkeypatch) -> list[list[str]]:
    """Each round trip ``client`` makes from now on, as its commands' names (a pipeline is one)."""
    trips: list[list[str]] = []
    one = client.execute_command

    def command(*args, **kwargs):
        if str(args[0]) != "INFO":  # RQ's version check, read once and kept
            trips.append([str(args[0])])
        return one(*args, **kwargs)

    piped = redis.client.Pipeline.execute

    def pipeline(self, *args, **kwargs):
        trips.append([str(command[0][0]) for command in self.command_stack])
        return piped(self, *args, **kwargs)

    client.execute_command = command
    monkeypatch.setattr(redis.client.Pipeline, "execute", pipeline)
    return trips


def _arriving_during_the_pop(queue_class, monkeypatch, arrive, trips) -> None:
    """The queues are empty when the worker's blocking pop begins; ``arrive()`` puts entries while it blocks
    (a producer's round trips: left out of the worker's ``trips``)."""
    real = {name: getattr(Queue, name).__func__ for name in ("lmove", "lpop")}  # the pop RQ uses: by version

    def waiting(name):
        def pop(cls, *args, **kwargs):
            time.sleep(0.01)
            mine = len(trips)
            arrive()
            del trips[mine:]
            return real[name](cls, *args, **kwargs)
        return classmethod(pop)

    for name in real:
        monkeypatch.setattr(queue_class, name, waiting(name))


def test_jobs_arriving_one_at_a_time_are_popped_without_looking_first(client, monkeypatch):
    """Nothing waits behind the entry a blocking pop took (counted with its hash's read, in the same round
    trip): the next dequeue blocks at once, the pop and then the hash, two round trips, not three. Entries
    waiting behind it turn the look back on: the next dequeue takes the entry and its hash at once."""
    queue_class = guarded_queue_class(lambda refusal: None)
    batch = queue_class("batch", connection=client, serializer=JSONSerializer)
    arriving: list[str] = []

    def one_job():
        arriving.append(batch.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None)).id)

    trips = _round_trips(client, monkeypatch)
    _arriving_during_the_pop(queue_class, monkeypatch, one_job, trips)
    assert queue_class.dequeue_any([batch], 5, connection=client, serializer=JSONSerializer)[0].id == arriving[-1]
    assert trips[0] == ["EVALSHA"], "the first dequeue looks first: nothing waits, then it blocks"
    for _ in range(2):
        trips.clear()
        assert queue_class.dequeue_any([batch], 5, connection=client, serializer=JSONSerializer)[0].id == arriving[-1]
        assert trips in POP_THEN_READ, trips

    def three_jobs():
        for _ in range(3):
            one_job()

    _arriving_during_the_pop(queue_class, monkeypatch, three_jobs, trips)
    trips.clear()
    assert queue_class.dequeue_any([batch], 5, connection=client, serializer=JSONSerializer)[0].id == arriving[-3]
    assert trips in POP_THEN_READ, trips
    trips.clear()
    assert queue_class.dequeue_any([batch], 5, connection=client, serializer=JSONSerializer)[0].id == arriving[-2]
    assert trips == [["EVALSHA"]], "entries were waiting: it looks first again, entry and hash at once"


def test_a_popped_entry_is_read_as_untrusted_as_a_taken_one(client, monkeypatch):
    """After a blocking pop, an entry that is not a job id is refused before any read of a hash, and one
    whose key holds another type is refused as malformed, as RQ's own read would have it; the good job
    behind them comes out."""
    refused: list[Refusal] = []
    queue_class = guarded_queue_class(refused.append)
    queue_class.look_first = False  # jobs arriving one at a time: the worker blocks at once
    batch = queue_class("batch", connection=client, serializer=JSONSerializer)
    wrong_type = job_id_for("default", None)
    client.set(f"rq:job:{wrong_type}", b"not a hash")
    good: list[str] = []

    def arrive():
        if not good:
            client.rpush(batch.key, b"../../etc/passwd", wrong_type)
            good.append(batch.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None)).id)

    trips = _round_trips(client, monkeypatch)
    _arriving_during_the_pop(queue_class, monkeypatch, arrive, trips)
    job, _ = queue_class.dequeue_any([batch], 5, connection=client, serializer=JSONSerializer)
    assert job.id == good[0] and job.args[0]["request"] == {"query": "BTC"}
    assert [(refusal.reason, refusal.job_id) for refusal in refused] == [("bad_id", None),
                                                                        ("malformed_job", wrong_type)]
    assert trips[1] in (["LLEN"], ["RPUSH", "LLEN"]), "no hash read for an entry that names no job"


def test_a_deep_queue_gives_several_jobs_in_one_trip_and_refuses_the_bad_among_them(client):
    """Up to ``take_up_to`` entries come off in one trip (the first queue's, as many as wait); the first is
    returned, the other Ferret jobs are held for the next dequeues (which send nothing), the rest refused."""
    refused: list[Refusal] = []
    queue_class = guarded_queue_class(refused.append)
    queue_class.take_up_to = 4
    prefetch = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    batch = queue_class("batch", connection=client, serializer=JSONSerializer)
    jobs = [batch.enqueue_call(JOB_FUNCTION, args=(_payload(),), job_id=job_id_for("default", None)) for _ in range(4)]
    client.delete(batch.key)
    client.rpush(batch.key, jobs[0].id, b"bad.id", jobs[1].id, jobs[2].id, jobs[3].id)
    assert queue_class.dequeue_any([prefetch], None, connection=client, serializer=JSONSerializer) is None  # loaded
    sent: list[tuple] = []
    original = client.execute_command

    def counted(*args, **kwargs):
        sent.append(args)
        return original(*args, **kwargs)

    client.execute_command = counted
    taken = [queue_class.dequeue_any([prefetch, batch], None, connection=client, serializer=JSONSerializer)
             for _ in range(3)]
    assert [(job.id, queue.name) for job, queue in taken] == [(job.id, "batch") for job in jobs[:3]]
    assert [args[0] for args in sent if args[0] != "LREM"] == ["EVALSHA"], "three jobs, one trip (and a refusal)"
    assert [r.reason for r in refused] == ["bad_id"]
    assert client.lrange(batch.key, 0, -1) == [jobs[3].id.encode()] and not queue_class.held
    assert queue_class.dequeue_any([prefetch, batch], None, connection=client, serializer=JSONSerializer)[0].id \
        == jobs[3].id, "one job when one waits"
    assert not queue_class.held


@pytest.mark.parametrize("lean", [True, False], ids=["one trip (lean)", "RQ's pop then read"])
def test_a_job_an_older_producer_named_by_the_former_module_runs_as_ferrets_function(client, lean):
    from ferret.rq_layer import entry

    queue_class = guarded_queue_class(lambda refusal: None, lean)
    queue = queue_class("prefetch", connection=client, serializer=JSONSerializer)
    queue.enqueue_call("rq_wing.entry.run_retrieval", args=(_payload(),), job_id=job_id_for("default", None))
    job, _ = queue_class.dequeue_any([queue], None, connection=client, serializer=JSONSerializer)
    assert job.func_name == JOB_FUNCTION and job.func is entry.run_retrieval
