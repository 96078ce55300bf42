"""Blocking waits on a job's result (``ResultStore.wait``), on a real redis-server: every waiter wakes when
the result is written (each puts the done token back for the next), and a wait that blocks costs three
round trips: the first read, the blocking pop, then the token put back and the result read together."""

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
    """This test's waiters now in their blocking pop."""
    return sum(1 for entry in client.client_list() if entry.get("name") == WAITER and entry.get("cmd") == "blpop")


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
    assert wait_until(lambda: _blocked(client) >= 3, 10)  # all three in their blocking pop
    _write_result(ctx, sample_namespace, job_id)
    for thread in threads:
        thread.join(10)
    assert len(got) == 3
    assert all(result is not None and result.job_id == job_id and result.status == "ok" for result in got)
    assert client.llen(f"ferret:done:{job_id}") == 1  # the token back for whoever waits next


def test_a_wait_that_blocks_makes_three_round_trips(settings, sample_namespace, monkeypatch):
    client = client_for(settings.redis.url)
    ctx = build_resources(settings, client)
    job_id = job_id_for(sample_namespace, None)
    sends: list[int] = []
    real_send = AbstractConnection.send_packed_command
    waiter: list[int] = []

    def counted(self, *args, **kwargs):
        if waiter and threading.get_ident() == waiter[0]:
            sends.append(1)
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
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
    assert len(sends) == 3  # the read that finds nothing, the pop, the token back with the read (it was four)
