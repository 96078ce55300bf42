"""``AsyncClient.remember`` on a real redis-server: when a write is the local store's write script alone
(no embeddings, no replicas, not Nous), it is sent from the loop, with no thread, and leaves exactly what
the blocking writer (``ferret ingest``'s) leaves; otherwise it runs that writer in a thread as before."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from ferret import keys
from ferret.errors import InvalidRequest, RedisUnreachable
from ferret.producer.api import AsyncClient, Client, plain_local_writes
from ferret.records import Memory
from ferret.settings import load_settings


def _memories() -> list[Memory]:
    notes = [Memory(id=f"m{n}", type="event", content_body=f"note {n} ü \" about the trip") for n in range(1203)]
    return [*notes[:11], Memory(id="m7", content_body="m7 again, later in the same batch: it wins"), *notes[11:]]


def _written(client: redis.Redis, namespace: str) -> tuple[Any, ...]:
    entries = [(fields[b"v"], fields[b"op"], fields[b"ids"]) for _, fields in client.xrange(keys.changes(namespace))]
    return client.hgetall(keys.memories(namespace)), client.get(keys.memory_version(namespace)), entries


def test_a_plain_write_from_the_loop_leaves_what_the_blocking_writer_leaves(redis_server, redis_client, monkeypatch):
    settings = load_settings(environ={"FERRET_REDIS__URL": redis_server.url})
    assert plain_local_writes(settings)

    def no_thread(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("a plain write took a thread")

    async def write() -> int:
        client = AsyncClient(settings, redis_server.url)
        try:
            monkeypatch.setattr(asyncio, "to_thread", no_thread)
            return await client.remember("from-the-loop", _memories())
        finally:
            await client.close()

    assert asyncio.run(write()) == 1203  # two writes of at most 1,000 ids; m7's later copy replaced the first
    with Client(settings, redis.Redis.from_url(redis_server.url)) as blocking:
        assert blocking.remember("blocking", _memories()) == 1203
    loop_side, blocking_side = _written(redis_client, "from-the-loop"), _written(redis_client, "blocking")
    assert loop_side == blocking_side and loop_side[1] == b"2" and len(loop_side[2]) == 2
    assert b"m7 again" in loop_side[0][b"m7"]


def test_a_write_that_embeds_or_waits_for_replicas_still_takes_the_thread(redis_server, monkeypatch):
    taken: list[str] = []

    async def thread(call: Any, namespace: str, memories: list[Memory]) -> int:
        taken.append(namespace)
        return len(memories)

    for setting in ({"FERRET_SEMANTIC__ENABLED": "true"}, {"FERRET_BACKEND__LOCAL__STORE_MIN_REPLICAS_ACKED": "1"}):
        settings = load_settings(environ={"FERRET_REDIS__URL": redis_server.url, **setting})
        assert not plain_local_writes(settings)

        async def write(settings: Any = settings) -> int:
            client = AsyncClient(settings, redis_server.url)
            try:
                monkeypatch.setattr(asyncio, "to_thread", thread)
                return await client.remember("ns", [Memory(id="a", content_body="x")])
            finally:
                await client.close()

        assert asyncio.run(write()) == 1
    assert taken == ["ns", "ns"]


def test_a_bad_namespace_is_named_and_a_store_out_of_reach_is_said():
    settings = load_settings(environ={"FERRET_REDIS__URL": "redis://127.0.0.1:1/0"})

    async def write(namespace: str) -> int:
        client = AsyncClient(settings, "redis://127.0.0.1:1/0")
        try:
            return await client.remember(namespace, [Memory(id="a", content_body="x")])
        finally:
            await client.close()

    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(write("bad namespace!"))
    assert refused.value.field == "namespace"
    with pytest.raises(RedisUnreachable):
        asyncio.run(write("fine"))
