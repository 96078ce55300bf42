"""Blocking waits on a job's result (``ResultStore.wait``), on a real redis-server: every waiter wakes when
the result is written (the done token stays for the next: each waiter moves the list onto itself), and a
wait that blocks costs one round trip: the blocking move with the result's read pipelined behind it."""

from __future__ import annotations

import copy
import threading
import time

import redis
from redis.connection import AbstractConnection

from ferret.contract import RetrievalResult
from ferret.job_ids import job_id_for
from ferret.redis_plumbing.redis_conn import client_for
from ferret.worker.core.resources import build_resources
from ferret.worker.core.run import run_job
from tests.conftest import wait_until


def _waiting(results, job_id: str, out: list[RetrievalResult | None]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.append(results.wait(job_id, 30)), daemon=True)
    thread.start()
    return thread


WAITER = "result-waiter"


def _waiters_store(ctx, url: str):
    """``ctx``'s result store on a client of its own, whose connections are named ``WAITER`` (the shared
    redis-server may hold other tests' blocked clients)."""
    results = copy.copy(ctx.results)
    results.client = redis.Redis.from_url(url, client_name=WAITER)
    return results


def _blocked(client) -> int:
    """This test's waiters now in their blocking move."""
    return sum(1 for entry in client.client_list() if entry.get("name") == WAITER and entry.get("cmd") == "blmove")


def _write_result(ctx, namespace: str, job_id: str) -> None:
    now = time.time()
    run_job(ctx, {"request": {"query": "BTC thesis", "namespace": namespace},
                  "enqueued_at": now, "deadline_at": now + 60}, job_id)


def test_every_waiter_on_a_job_wakes_when_its_result_is_written(settings, sample_namespace):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    got: list[RetrievalResult | None] = []
    results = _waiters_store(ctx, settings.redis.url)
    threads = [_waiting(results, job_id, got) for _ in range(3)]
    assert wait_until(lambda: _blocked(client) >= 3, 10)  # all three in their blocking move
    _write_result(ctx, sample_namespace, job_id)
    for thread in threads:
        thread.join(10)
    assert len(got) == 3
    assert all(result is not None and result.job_id == job_id and result.status == "ok" for result in got)
    assert client.llen(f"ferret:done:{job_id}") == 1  # the token back for whoever waits next


def test_a_wait_that_blocks_makes_one_round_trip(settings, sample_namespace, monkeypatch):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    waiter: list[int] = []
    sends = _counting_sends(monkeypatch, waiter)
    got: list[RetrievalResult | None] = []
    results = _waiters_store(ctx, settings.redis.url)

    def wait() -> None:
        results.client.ping()  # the connection's handshake is not the wait's
        waiter.append(threading.get_ident())
        got.append(results.wait(job_id, 30))

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    assert wait_until(lambda: _blocked(client) >= 1, 10)
    _write_result(ctx, sample_namespace, job_id)
    thread.join(10)
    assert got and got[0] is not None and got[0].status == "ok"
    assert len(sends) == 1  # the blocking move and the read behind it (it was three: a read, the pop, the token back)


def _counting_sends(monkeypatch, threads: list[int]) -> list[int]:
    """One entry per command batch sent from now on by a thread in ``threads`` (idents, which may be added
    later: a waiter adds its own once its connection's handshake is done)."""
    sends: list[int] = []
    real_send = AbstractConnection.send_packed_command

    def counted(self, *args, **kwargs):
        if threading.get_ident() in threads:
            sends.append(1)
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sends


def test_a_result_already_there_is_read_in_one_round_trip_and_its_token_keeps_its_ttl(settings, sample_namespace,
                                                                                      monkeypatch):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    _write_result(ctx, sample_namespace, job_id)
    ttl = client.ttl(f"ferret:done:{job_id}")
    results = _waiters_store(ctx, settings.redis.url)
    results.client.ping()
    sends = _counting_sends(monkeypatch, [threading.get_ident()])
    found = results.wait(job_id, 30)
    assert found is not None and found.job_id == job_id
    assert len(sends) == 1
    assert client.lrange(f"ferret:done:{job_id}", 0, -1) == [b"1"]
    assert 0 < client.ttl(f"ferret:done:{job_id}") <= ttl  # the rotation left the list and its TTL as they were


def test_a_token_with_no_result_under_it_does_not_spin(settings, monkeypatch):
    """A done list holding a token while the result is gone (evicted, or a token pushed by anyone: Redis is
    untrusted) returns at once from every blocking move: the wait pauses between slices instead of asking
    Redis as fast as it answers, and ends at its timeout with no result."""
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for("no-result-here", None)
    client.rpush(f"ferret:done:{job_id}", "1")
    client.expire(f"ferret:done:{job_id}", 60)
    results = _waiters_store(ctx, settings.redis.url)
    results.client.ping()
    sends = _counting_sends(monkeypatch, [threading.get_ident()])
    assert results.wait(job_id, 0.5) is None
    # 0.5 s in pauses of 0.1 s: about five slices and the last read, where a spin would send hundreds.
    assert len(sends) <= 8


def test_a_wait_with_no_time_left_is_a_plain_read(settings, sample_namespace):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    results = _waiters_store(ctx, settings.redis.url)
    assert results.wait(job_id, 0) is None  # nothing there, and no blocking (a timeout of 0 would be forever)
    _write_result(ctx, sample_namespace, job_id)
    client.delete(f"ferret:done:{job_id}")  # the result alone, with no token to wake anyone
    found = results.wait(job_id, 0)
    assert found is not None and found.job_id == job_id


def test_a_done_key_that_is_not_a_list_turns_the_wait_into_reads(settings, sample_namespace):
    """Anything can be under the done key (Redis is untrusted): a move Redis refuses (WRONGTYPE here; at
    ``maxmemory`` it refuses a move as it refuses any command that may add data) does not end the wait, which
    reads once a pause until the result is there."""
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    client.set(f"ferret:done:{job_id}", "not a list", ex=60)
    results = _waiters_store(ctx, settings.redis.url)
    got: list[RetrievalResult | None] = []
    thread = _waiting(results, job_id, got)
    time.sleep(0.3)  # the waiter is reading, not blocked
    _write_result(ctx, sample_namespace, job_id)
    thread.join(10)
    assert got and got[0] is not None and got[0].job_id == job_id


def test_a_wait_that_times_out_reads_once_at_its_end(settings, monkeypatch):
    """The read pipelined behind the last blocking move came when the wait's time ran out: no read is sent
    after it."""
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    results = _waiters_store(ctx, settings.redis.url)
    results.client.ping()
    sends = _counting_sends(monkeypatch, [threading.get_ident()])
    assert results.wait(job_id_for("nothing-here", None), 0.3) is None
    assert len(sends) == 1  # the one slice (its move timed out, its read found nothing), no read after it
