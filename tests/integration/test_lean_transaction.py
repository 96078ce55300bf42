"""The lean transaction against redis-py's own, on a real redis-server: the same writes, the same errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import fakeredis
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferret.redis_plumbing import lean_transaction as lean
from ferret.redis_plumbing.lean_transaction import LeanPipeline, LeanTransaction, lean_pipeline, lean_transaction

Queue = Callable[[Any], None]  # queues commands on a pipeline


@pytest.fixture
def pair(redis_server) -> Iterator[tuple[redis.Redis, redis.Redis]]:  # type: ignore[no-untyped-def]
    """Two databases of one server: redis-py's transactions write to the first, the lean ones to the second."""
    ours, theirs = (redis.Redis.from_url(redis_server.url + ("&" if "?" in redis_server.url else "?") + f"db={db}")
                    for db in (1, 2))
    for client in (ours, theirs):
        client.flushdb()
    yield theirs, ours
    for client in (ours, theirs):
        client.flushdb()
        client.close()


def state(client: redis.Redis) -> dict[bytes, tuple[bytes, Any, int]]:
    """Every key: its type, its value and whether it expires."""
    out: dict[bytes, tuple[bytes, Any, int]] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        value: Any = {b"string": client.get, b"hash": client.hgetall, b"set": client.smembers,
                      b"list": lambda k: client.lrange(k, 0, -1),
                      b"zset": lambda k: client.zrange(k, 0, -1, withscores=True)}[kind](key)
        out[key] = (kind, value, client.ttl(key) > 0)
    return out


def both(pair: tuple[redis.Redis, redis.Redis], commands: Queue,
         transaction: bool = True) -> tuple[list[Any], list[Any]]:
    """The same commands through redis-py's pipeline and the lean one (a transaction, or not); each one's
    answers."""
    theirs, ours = pair
    with theirs.pipeline(transaction=transaction) as pipe:
        commands(pipe)
        theirs_answers = pipe.execute()
    with (lean_transaction if transaction else lean_pipeline)(ours) as pipe:
        assert isinstance(pipe, LeanTransaction if transaction else LeanPipeline)
        commands(pipe)
        our_answers = pipe.execute()
    return theirs_answers, our_answers


def rq_like(pipe: Any) -> None:
    """What a worker's start and success of a job send (RQ's own command shapes)."""
    pipe.hset("rq:execution:j1:e1", mapping={"id": "e1", "job_id": "j1", "created_at": 1795776111.071502,
                                             "last_heartbeat": 1795776111.071502})
    pipe.expire("rq:execution:j1:e1", 16)
    pipe.zadd("rq:executions:j1", {"e1": 1795776187})
    pipe.zadd("rq:wip:batch", {"j1:e1": 1795776127.5})
    pipe.sadd("rq:worker:w:executions", "j1:e1")
    pipe.hset("rq:job:j1", mapping={"status": "started", "started_at": "2026-11-27T10:41:51.071558Z"})
    pipe.persist("rq:job:j1")
    pipe.hincrby("rq:worker:w", "successful_job_count", 1)
    pipe.hincrbyfloat("rq:worker:w", "total_working_time", 0.003022)
    pipe.rpush("done", b"\x1f\x8b\x00binary", bytearray(b"array"), memoryview(b"view"))
    pipe.execute_command("CLIENT SETNAME", "lean")  # a first argument with a space: split, as redis-py does
    pipe.srem("rq:worker:w:executions", "j1:e1")
    pipe.delete("rq:execution:j1:e1", "rq:nothing")


def test_rq_shaped_commands_write_what_redis_py_writes_and_answer_raw(pair):
    theirs_answers, our_answers = both(pair, rq_like)
    assert state(pair[1]) == state(pair[0])
    assert len(our_answers) == len(theirs_answers) == 13
    # raw: no response callbacks (redis-py turns OK into True and a float's reply into a float)
    assert our_answers[1] == 1 and our_answers[8] == b"0.003022" and theirs_answers[8] == pytest.approx(0.003022)
    assert our_answers[10] == b"OK" and theirs_answers[10] is True
    same = [index for index in range(13) if index not in (8, 10)]
    assert [our_answers[i] for i in same] == [int(theirs_answers[i]) for i in same]  # counts; True for EXPIRE


_VALUE = (st.text(max_size=30) | st.binary(max_size=30) | st.integers(-2**62, 2**62)
          | st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_VALUE, min_size=1, max_size=6), field=st.text(min_size=1, max_size=10))
def test_any_value_redis_py_sends_is_stored_the_same(pair, values, field):
    for client in pair:
        client.flushdb()

    def commands(pipe: Any) -> None:
        pipe.rpush("list", *values)
        pipe.hset("hash", field, values[0])
        pipe.set("string", values[-1])

    both(pair, commands)
    assert state(pair[1]) == state(pair[0])


def test_a_command_failing_inside_exec_raises_as_redis_py_and_the_others_apply(pair):
    for client in pair:
        client.set("text", "not a hash")

    def commands(pipe: Any) -> None:
        pipe.set("before", 1)
        pipe.hset("text", "f", "v")  # WRONGTYPE, at EXEC
        pipe.set("after", 2)

    errors = []
    for client, make in zip(pair, (lambda c: c.pipeline(), lean_transaction), strict=True):
        with make(client) as pipe, pytest.raises(redis.ResponseError) as raised:
            commands(pipe)
            pipe.execute()
        errors.append(str(raised.value))
        assert client.get("after") == b"2" and client.get("before") == b"1"  # applied, as Redis does
        assert client.ping()  # every reply was read: the connection is in step
    assert errors[1] == errors[0] and "WRONGTYPE" in errors[1] and "Command # 2" in errors[1]


def test_a_command_redis_refuses_to_queue_aborts_the_whole_transaction(pair):
    errors = []
    for client, make in zip(pair, (lambda c: c.pipeline(), lean_transaction), strict=True):
        with make(client) as pipe, pytest.raises(redis.ResponseError) as raised:
            pipe.set("applied", 1)
            pipe.execute_command("EXPIRE", "k")  # wrong number of arguments: refused when queued
            pipe.execute()
        errors.append((type(raised.value), "wrong number of arguments" in str(raised.value)))
        assert client.exists("applied") == 0
        assert client.ping()
    assert errors[1] == errors[0] == (errors[0][0], True)


def test_an_argument_redis_py_cannot_send_is_a_data_error_and_nothing_is_sent(pair):
    theirs, ours = pair
    for client, make in ((theirs, theirs.pipeline), (ours, lambda: lean_transaction(ours))):
        with make() as pipe, pytest.raises(redis.DataError):
            pipe.set("a", 1)
            pipe.execute_command("SET", "b", None)
            pipe.execute()
        assert client.exists("a") == 0 and client.ping()


def test_a_watched_key_changed_is_a_watch_error(pair):
    _, ours = pair
    with lean_transaction(ours) as pipe:
        pipe.watch("guarded")
        ours.set("guarded", "changed by another client")
        pipe.multi()
        pipe.set("guarded", "mine")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert ours.get("guarded") == b"changed by another client"


def test_without_hiredis_it_is_redis_pys_own_transaction(pair, monkeypatch):
    monkeypatch.setattr(lean, "pack_command", None)
    theirs_answers, our_answers = both(pair, rq_like)
    assert our_answers == theirs_answers  # redis-py's path: its callbacks ran
    assert state(pair[1]) == state(pair[0])


def test_it_works_on_fakeredis_too_for_the_unit_tests():
    client = fakeredis.FakeRedis()
    with lean_transaction(client) as pipe:
        rq_like(pipe)
        answers = pipe.execute()
    assert len(answers) == 13 and client.hget("rq:job:j1", "status") == b"started"


def test_the_lean_pipeline_writes_what_redis_pys_writes_and_answers_raw(pair):
    """No transaction: the same writes; the answers raw (redis-py's callbacks make ``OK`` True and a float's
    text a float; a count is an int either way)."""
    theirs_answers, our_answers = both(pair, rq_like, transaction=False)
    assert state(pair[1]) == state(pair[0])
    assert len(our_answers) == len(theirs_answers) == 13
    for mine, redis_pys in zip(our_answers, theirs_answers, strict=True):
        assert (mine == redis_pys or (mine == b"OK" and redis_pys is True)
                or (isinstance(redis_pys, float) and float(mine) == redis_pys)), (mine, redis_pys)


def test_the_lean_pipeline_puts_each_error_in_its_place_or_raises_as_redis_py(pair):
    """A script Redis has not (NOSCRIPT) and a WRONGTYPE: in their places without ``raise_on_error``, the
    others applied and answered; with it, the first raised as redis-py raises it; the connection in step."""
    for client in pair:
        client.set("text", "not a hash")

    def commands(pipe: Any) -> None:
        pipe.set("before", 1)
        pipe.execute_command("EVALSHA", "0" * 40, 0)
        pipe.hset("text", "f", "v")
        pipe.execute_command("EVAL", "return 7", 0)

    answers = []
    for client, make in zip(pair, (lambda c: c.pipeline(transaction=False), lean_pipeline), strict=True):
        with make(client) as pipe:
            commands(pipe)
            answers.append(pipe.execute(raise_on_error=False))
        with make(client) as pipe, pytest.raises(redis.ResponseError) as raised:
            commands(pipe)
            pipe.execute()
        answers.append(str(raised.value))
        assert client.ping()
    theirs_quiet, theirs_raised, ours_quiet, ours_raised = answers
    assert [type(a) for a in ours_quiet] == [bytes, redis.exceptions.NoScriptError, redis.ResponseError, int]
    assert [type(a) for a in theirs_quiet][1:] == [type(a) for a in ours_quiet][1:]
    assert ours_quiet[3] == theirs_quiet[3] == 7
    assert ours_raised == theirs_raised and "Command # 2" in ours_raised
