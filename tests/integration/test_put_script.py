"""A job's put in one Lua script (``ferret.producer.put_script``), on a real redis-server: it leaves what
RQ's own transaction of the same commands leaves, puts nothing when the twin slot is held, and pushes a
conversation's entry, answering with the earlier entries whose job is still on the queue."""

from __future__ import annotations

import time
from typing import Any

import redis

from ferret.producer.put_script import Claim, ConversationPush, Put, put_job
from ferret.rq_layer.producer_side import PREFETCH_QUEUE_KEY, EnqueueCommands
from ferret.steps import Eval


def run_put(client: redis.Redis, rule: Any) -> Put:
    reply: Any = None
    while True:
        try:
            op = rule.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        assert isinstance(op, Eval)
        reply = client.register_script(op.source)(keys=list(op.keys), args=list(op.args))


def everything(client: redis.Redis) -> dict[bytes, Any]:
    """Every key with its type, value and whether it expires."""
    found: dict[bytes, Any] = {}
    for key in client.keys("*"):
        kind = client.type(key)
        value = {b"hash": client.hgetall, b"list": lambda k: client.lrange(k, 0, -1),
                 b"set": client.smembers, b"string": client.get}[kind](key)
        found[key] = (kind, value, client.ttl(key) > 0)
    return found


def test_the_put_leaves_what_rqs_transaction_of_the_same_commands_leaves(redis_client):
    enqueue = EnqueueCommands()
    for number, queue in enumerate(["prefetch", "batch", "prefetch"]):
        payload = {"request": {"query": f"q {number} ü \x00 \"", "namespace": "ns"}, "n": number}
        commands = enqueue(queue, payload, f"fr-r-{number:032x}", timeout=7 + number, failure_ttl=60,
                           now=time.time())
        redis_client.flushdb()
        with redis_client.pipeline(transaction=True) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            pipe.execute()
        by_rq = everything(redis_client)
        redis_client.flushdb()
        assert run_put(redis_client, put_job(commands)) == Put(True, None)
        assert everything(redis_client) == by_rq and by_rq


def test_a_held_slot_puts_nothing(redis_client):
    commands = EnqueueCommands()("prefetch", {"n": 1}, "fr-r-" + "b" * 32, timeout=5, failure_ttl=60, now=time.time())
    redis_client.set("slot", "fr-r-holder")
    put = run_put(redis_client, put_job(commands, Claim("slot", "fr-r-" + "b" * 32, 5000)))
    assert put == Put(False, None)
    assert redis_client.keys("rq:*") == [] and redis_client.get("slot") == b"fr-r-holder"
    redis_client.delete("slot")
    assert run_put(redis_client, put_job(commands, Claim("slot", "fr-r-" + "b" * 32, 5000))).put
    assert redis_client.get("slot") == b"fr-r-" + b"b" * 32 and 0 < redis_client.pttl("slot") <= 5000
    assert redis_client.lrange(PREFETCH_QUEUE_KEY, 0, -1) == [b"fr-r-" + b"b" * 32]


def test_a_conversations_entry_is_pushed_and_its_queued_predecessors_come_back(redis_client):
    enqueue = EnqueueCommands()

    def prefetch(number: int) -> Put:
        job_id = f"fr-r-{number:032x}"
        push = ConversationPush("conversation", entry(number), 60, 5, PREFETCH_QUEUE_KEY)
        return run_put(redis_client, put_job(enqueue("prefetch", {"n": number}, job_id, timeout=5, failure_ttl=60,
                                                     now=time.time()), None, push))

    def entry(number: int) -> str:
        return f"fr-r-{number:032x} 3 1000.{number} 1005.{number} 0"

    for number in range(6):  # nothing taken yet: every entry kept before comes back, newest first
        assert prefetch(number).queued == [entry(n).encode() for n in reversed(range(max(0, number - 5), number))]
    redis_client.lrem(PREFETCH_QUEUE_KEY, 0, f"fr-r-{4:032x}")  # a worker took job 4
    redis_client.lpush("conversation", "not an entry")  # garbage in the list is no job on the queue
    assert prefetch(6).queued == [entry(n).encode() for n in (5, 3, 2, 1)]
    assert redis_client.lrange("conversation", 0, -1) == [entry(6).encode(), b"not an entry",
                                                          *(entry(n).encode() for n in (5, 4, 3))]
    assert 0 < redis_client.ttl("conversation") <= 60
