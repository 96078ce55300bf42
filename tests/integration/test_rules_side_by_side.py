"""Rules run side by side (``SyncSteps.run_together``): the same answers as one at a time, in as many
round trips as the longest rule takes, errors thrown back into their own rule only."""

from __future__ import annotations

import logging
import threading

import redis
from redis.client import Pipeline

from ferret.errors import InvalidRequest
from ferret.redis_plumbing.clock import RedisClock
from ferret.redis_plumbing.redis_conn import client_for
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.steps import Batch, Call, Eval, Step
from ferret.steps_sync import SyncSteps
from tests.conftest import RedisServer


def _count_round_trips(monkeypatch) -> list[int]:
    trips = [0]
    real = Pipeline.execute

    def counted(self, raise_on_error=True):  # type: ignore[no-untyped-def]
        trips[0] += 1
        return real(self, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", counted)
    return trips


def test_many_enqueues_cost_the_round_trips_of_one(producer, redis_client, monkeypatch):
    requests = [{"query": f"BTC thesis {n}", "namespace": "side", "queue": "batch", "request_id": f"side-{n}"}
                for n in range(300)]
    requests.append({"query": "", "namespace": "side"})  # refused, alone
    trips = _count_round_trips(monkeypatch)
    answers = producer.enqueue_many(requests)
    assert isinstance(answers[-1], InvalidRequest) and "query" in str(answers[-1])
    handles = answers[:-1]
    assert [h.request_id for h in handles] == [f"side-{n}" for n in range(300)]
    assert len({h.job_id for h in handles}) == 300 and not any(h.duplicate for h in handles)
    assert trips[0] <= 4, trips[0]  # the claim, the memory version, the enqueue transaction (and a clock read)
    assert redis_client.llen("rq:queue:batch") >= 300
    again = producer.enqueue_many(requests[:3])  # the same ids: the same jobs, said to be duplicates
    assert [h.job_id for h in again] == [h.job_id for h in handles[:3]] and all(h.duplicate for h in again)
    one_by_one = producer.enqueue(requests[0])
    assert one_by_one.job_id == handles[0].job_id
    assert producer.results_of(handles[:5]) == [None] * 5


def test_an_error_reply_goes_back_to_its_own_rule(producer, redis_client):
    redis_client.delete("side:list")
    redis_client.rpush("side:list", "x")  # a list: GET on it is WRONGTYPE

    def reads(key: str) -> Step[str]:
        try:
            value = yield Call(("GET", key))
        except redis.ResponseError as exc:
            return f"error {str(exc).split()[0]}"
        written = yield Batch((("SET", f"{key}:seen", "1"), ("GET", f"{key}:seen")), transaction=True)
        return f"{value!r} then {written[1]!r}"

    redis_client.set("side:string", "v")
    answers = producer.steps.run_together([reads("side:string"), reads("side:list"), reads("side:none")])
    assert answers == ["b'v' then b'1'", "error WRONGTYPE", "None then b'1'"]


def test_the_same_read_asked_by_many_rules_in_a_round_is_sent_once(producer, redis_client, monkeypatch):
    """A batch's lines read their namespace's memory version in the same round: one GET answers them all;
    different reads, and writes, are each sent."""
    redis_client.set("side:shared", "v1")
    sent: list[tuple] = []
    real = Pipeline.execute_command

    def noted(self, *args, **options):  # type: ignore[no-untyped-def]
        sent.append(args)
        return real(self, *args, **options)

    monkeypatch.setattr(Pipeline, "execute_command", noted)

    def reads(other: str) -> Step[tuple]:
        shared = yield Call(("GET", "side:shared"))
        own = yield Call(("GET", other))
        yield Call(("SET", other, "seen"))
        again = yield Call(("EXISTS", "side:shared"))
        return shared, own, again

    redis_client.set("side:own-1", "a")
    answers = producer.steps.run_together([reads(f"side:own-{n}") for n in range(1, 4)])
    assert answers == [(b"v1", b"a", 1), (b"v1", None, 1), (b"v1", None, 1)]
    assert sent.count(("GET", "side:shared")) == 1 and sent.count(("EXISTS", "side:shared")) == 1
    assert [args for args in sent if args[0] == "SET"] == [("SET", f"side:own-{n}", "seen") for n in range(1, 4)]
    assert len([args for args in sent if args[:2] == ("GET", "side:own-2")]) == 1


def _scripts_lost_once_checked(monkeypatch, redis_client) -> list[int]:
    """The server's scripts flushed right after the next pipeline has checked for its own (SCRIPT EXISTS/LOAD),
    as a failover between that check and the sending does (the promoted replica has not its primary's)."""
    flushed = [0]
    real = Pipeline.load_scripts

    def then_lost(self):  # type: ignore[no-untyped-def]
        real(self)
        if not flushed[0]:
            flushed[0] += 1
            redis_client.script_flush()

    monkeypatch.setattr(Pipeline, "load_scripts", then_lost)
    return flushed


def test_enqueues_whose_scripts_went_missing_before_sending_are_each_enqueued_once(producer, redis_client,
                                                                                    monkeypatch):
    redis_client.delete("rq:queue:batch")
    requests = [{"query": f"ETH basis {n}", "namespace": "side", "queue": "batch", "request_id": f"lost-{n}"}
                for n in range(20)]
    flushed = _scripts_lost_once_checked(monkeypatch, redis_client)
    answers = producer.enqueue_many(requests)
    assert flushed[0] == 1
    assert not [a for a in answers if isinstance(a, Exception)], answers
    assert len({a.job_id for a in answers}) == 20 and not any(a.duplicate for a in answers)
    assert redis_client.llen("rq:queue:batch") == 20


def test_a_script_missing_in_an_atomic_round_runs_once_and_the_batch_beside_it_once(producer, redis_client,
                                                                                      monkeypatch):
    redis_client.delete("side:count", "side:batch")

    def counts() -> Step[int]:
        return (yield Eval("return redis.call('INCR', KEYS[1])", ("side:count",), ()))

    def writes() -> Step[list]:
        return (yield Batch((("INCR", "side:batch"), ("GET", "side:batch")), transaction=True))

    flushed = _scripts_lost_once_checked(monkeypatch, redis_client)
    answers = producer.steps.run_together([counts(), writes()])
    assert flushed[0] == 1
    assert answers == [1, [1, b"1"]]
    assert redis_client.get("side:count") == b"1" and redis_client.get("side:batch") == b"1"


def test_writes_refused_for_want_of_memory_wait_for_room_then_run_once(tmp_path, caplog):
    """A round's commands and scripts that a full Redis refused (``maxmemory``) are sent again until it has
    room: each runs once, and the wait is said once when it starts and once when it ends. (Read as replies,
    the refusals were thrown into their rules: a batch enqueueing while Redis was full ended with a traceback.)"""
    server = RedisServer(tmp_path)
    admin = redis.Redis.from_url(server.url)
    client = client_for(server.url)
    try:
        steps = SyncSteps(client, client, RedisClock(client), ReplicaWait(client, 0, 0))

        def counts(key: str, script_first: bool) -> Step[tuple[int, int]]:
            script = Eval("return redis.call('INCR', KEYS[1])", (f"{key}:by-script",), ())
            first = yield (script if script_first else Call(("INCR", key)))
            second = yield (Call(("INCR", key)) if script_first else script)
            return first, second

        admin.config_set("maxmemory", 1)  # every write refused: OOM command not allowed
        lift = threading.Timer(1.0, admin.config_set, ("maxmemory", 0))
        lift.start()
        with caplog.at_level(logging.WARNING, logger="ferret.redis_plumbing.redis_retry"):
            answers = steps.run_together([counts("a", False), counts("b", True)])
        lift.join()
        assert answers == [(1, 1), (1, 1)]
        assert [admin.get(key) for key in ("a", "a:by-script", "b", "b:by-script")] == [b"1"] * 4  # each ran once
        said = [record.getMessage() for record in caplog.records]
        assert sum("is out of memory" in line for line in said) == 1, said
        assert sum("has room again" in line for line in said) == 1, said
    finally:
        admin.config_set("maxmemory", 0)
        client.close()
        server.stop()
