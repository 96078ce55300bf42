"""``ferret.connect_async()`` against a real redis-server and real workers of both
classes: the blocking client's methods as coroutines, the same rules (a request
id enqueued by one client is the same job for the other), supersedes, and a
thousand waits on one event loop sharing a handful of connections."""

from __future__ import annotations

import asyncio

import pytest

import ferret
from ferret.bench.loop_stall import StallMeter
from ferret.errors import InvalidMemory, InvalidRequest, ResultTimeout
from ferret.records import Memory
from tests.timing import scaled


@pytest.fixture
def ferret_env(env, monkeypatch):
    for name, value in env.items():
        if name.startswith("FERRET_"):
            monkeypatch.setenv(name, value)
    return env


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_remember_query_prefetch_forget(ferret_env, start_workers, worker_class):
    async def play() -> None:
        async with ferret.connect_async() as client:
            assert await client.remember("kitchen", [
                Memory(id="bread", type="procedure", content_body="Sourdough: feed the starter the night before"),
                {"id": "anna", "type": "event", "content_body": "Dinner party for Anna on Friday"},
            ]) == 2
            result = await client.query("when is the dinner party for Anna", "kitchen")
            assert result.status == "ok" and result.results[0].id == "anna"
            handle = await client.enqueue(query="sourdough starter", namespace="kitchen", request_id="turn-1")
            assert (await client.wait(handle, 20)).results[0].id == "bread"
            assert (await client.status(handle)).status == "ok" and (await client.trace(handle))["spans"]
            assert (await client.result(handle.job_id)).results[0].id == "bread"
            first = await client.prefetch("kitchen", "chat-1", "the dinner party")
            latest = await client.prefetch("kitchen", "chat-1", "sourdough")
            assert (await client.wait(latest, 20)).status == "ok"
            superseded = await client.wait(first, 5)  # queued behind nothing: taken, or superseded
            assert superseded.status in ("ok", "expired")
            if superseded.status == "expired":
                assert superseded.stats.superseded_by == latest.job_id
            context = await client.context_for("kitchen", "chat-1")
            assert context.result.job_id == latest.job_id and "Sourdough" in context.context and not context.stale
            assert await client.forget("kitchen", ["anna", "nope"]) == 1
            assert (await client.context_for("kitchen", "chat-1")).stale  # memories changed since
            with pytest.raises(InvalidMemory, match=r"memories\[1\]\.content_body"):
                await client.remember("kitchen", [{"id": "a", "content_body": "fine"}, {"id": "b", "content_body": 5}])
            with pytest.raises(InvalidRequest, match="query"):
                await client.enqueue(namespace="kitchen")

    start_workers(1, "--worker-class", worker_class)
    asyncio.run(play())


def test_both_clients_follow_the_same_rules(ferret_env, start_workers):
    """A request id is one job whichever client enqueues it; a different request under it is refused."""
    async def play() -> None:
        with ferret.connect() as blocking:
            blocking.remember("n", [{"id": "a", "content_body": "the Lisbon trip is in June"}])
            made = blocking.enqueue(query="Lisbon trip", namespace="n", request_id="r-1")
            async with ferret.connect_async() as client:
                again = await client.enqueue(query="Lisbon trip", namespace="n", request_id="r-1")
                assert again.job_id == made.job_id and again.duplicate and again.trace_id == made.trace_id
                with pytest.raises(InvalidRequest, match="request_id"):
                    await client.enqueue(query="Porto trip", namespace="n", request_id="r-1")
                with pytest.raises(ResultTimeout) as timed_out:  # no worker yet: it says so
                    await client.wait(again, 0.3)
                assert timed_out.value.rq_state == "queued" and timed_out.value.workers == 0
                start_workers(1)
                assert (await client.wait(again, 20)).results[0].id == "a"
                assert blocking.wait(made, 5).job_id == made.job_id

    asyncio.run(play())


def test_a_thousand_waits_on_one_loop(ferret_env, start_workers, redis_client, record_property):
    """1,000 concurrent waits, one event loop, two real workers: every one gets its result,
    the client holds a few connections (not one per waiter), and the loop's longest stall
    is measured (``ferret.bench.loop_stall``) and reported, not asserted (timing). The workers
    start once every waiter waits, so results come while they wait, announced (a worker that
    kept up with the enqueues would leave every result there before its wait began)."""

    patience = scaled(120)  # measured once: each measure is a 30 ms probe

    async def play() -> tuple[dict[str, float], int, int]:
        async with ferret.connect_async() as client:
            await client.remember("many", [{"id": f"m{i}", "content_body": f"note {i} about topic {i % 7}"}
                                           for i in range(50)])
            handles = [await client.enqueue(query=f"topic {i % 7} note {i}", namespace="many",
                                            options={"cache": False}, deadline_seconds=patience)
                       for i in range(1000)]
            meter = StallMeter().start()
            stop = asyncio.Event()
            connections = 0

            async def count_connections() -> None:
                nonlocal connections
                while not stop.is_set():
                    clients = await client.client.client_list()
                    connections = max(connections, len(clients) - 3)  # minus the workers' and this one
                    await asyncio.sleep(0.05)

            counting = asyncio.create_task(count_connections())
            waiting = asyncio.gather(*(client.wait(handle, patience) for handle in handles))
            await asyncio.sleep(0.5)  # every waiter subscribed and its first read made: nothing there yet
            await asyncio.to_thread(start_workers, 2)
            results = await waiting
            stop.set()
            stall = await meter.stop()
            await counting
            assert all(result.status == "ok" for result in results)
            assert [result.job_id for result in results] == [handle.job_id for handle in handles]
            return stall, connections, client.hub.messages

    stall, connections, woken = asyncio.run(play())
    for name, value in stall.items():
        record_property(f"loop_{name}", value)
    print(f"1,000 waits: event loop {stall}, at most {connections} connections beyond three, {woken} announcements")
    assert connections <= 80  # a bounded pool: without it a thousand waiters would hold a thousand sockets
    assert woken > 0  # results came through the announcements, not only the slices
