"""A trip's batch results held by their worker and written together at its end, with RQ's success of their
jobs in one call when each was written (``ferret.worker.core.held_results``), and a job alone in its trip
ended the same way: every job still ends once, each write's outcome is the one a job's own write would have,
RQ's success is never sent for a job whose result was not written, and a worker lost with results held loses
no job. Real redis-server, real workers."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry
from rq import Queue
from rq.serializers import JSONSerializer

from ferret import keys
from ferret.contract import RetrievalResult, Timestamps
from ferret.results import ResultStore
from ferret.rq_layer import trip_batching
from ferret.rq_layer.runner import build_worker
from ferret.worker.metrics import FerretMetrics


def _requests(namespace: str, count: int, queue: str = "batch", tag: str = "") -> list[dict]:
    return [{"query": f"BTC thesis {tag}{i}", "namespace": namespace, "queue": queue, "deadline_seconds": 600}
            for i in range(count)]


def _worker(redis_client, settings, queue: str, take: int) -> Any:
    worker = build_worker(redis_client, settings, [queue], metrics=FerretMetrics(CollectorRegistry()))
    worker.queue_class.take_up_to = take  # the first trip takes them all (the worker sizes later trips itself)
    return worker


def _ended(worker, queue: str, status: str) -> float:
    """What the worker's observers were told: its jobs counted by queue and status."""
    return worker.ferret_metrics.jobs.labels(queue, status)._value.get()


@pytest.fixture
def writes(monkeypatch) -> dict[str, list]:
    """Each result written on a job's own path (``ResultStore.write``); at each trip's end, which of the held
    jobs already had a result before the held ones were written, under ``one_call`` when they were written
    with their success in one call (``finish_held``), else under ``held`` (``write_held``)."""
    seen: dict[str, list] = {"own": [], "held": [], "one_call": []}
    own_write, held_write, finish = ResultStore.write, trip_batching.write_held, trip_batching.finish_held

    def before(results):  # type: ignore[no-untyped-def]
        client = results[0].ctx.results.client if results else None
        return [(one.result.job_id, bool(client.exists(keys.result(one.result.job_id)))) for one in results]

    def own(self, result, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["own"].append(result.job_id)
        return own_write(self, result, *args, **kwargs)

    def held(results):  # type: ignore[no-untyped-def]
        seen["held"].append(before(results))
        return held_write(results)

    def one_call(results, pipeline):  # type: ignore[no-untyped-def]
        found = before(results)
        reports = finish(results, pipeline)
        if reports is not None:
            seen["one_call"].append(found)
        return reports

    monkeypatch.setattr(ResultStore, "write", own)
    monkeypatch.setattr(trip_batching, "write_held", held)
    monkeypatch.setattr(trip_batching, "finish_held", one_call)
    return seen


def _commands(redis_client: redis.Redis) -> dict[str, int]:
    """Redis's count of each command run since its last ``CONFIG RESETSTAT``."""
    return {name.removeprefix("cmdstat_"): stat["calls"] for name, stat in redis_client.info("commandstats").items()}


def test_a_trips_batch_results_are_written_at_its_end_in_one_go(producer, redis_client, settings,
                                                                sample_namespace, writes):
    handles = producer.enqueue_many(_requests(sample_namespace, 6))
    worker = _worker(redis_client, settings, "batch", 6)
    worker.work(burst=True, with_scheduler=False)
    ids = [h.job_id for h in handles]
    assert writes["own"] == [] and not any(writes["held"])
    assert [sorted(trip) for trip in writes["one_call"]] == [sorted((job_id, False) for job_id in ids)]
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 6  # type: ignore[union-attr]
    assert _ended(worker, "batch", "ok") == 6  # each job reported to the observers once, when written
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert queue.started_job_registry.count == 0 and queue.finished_job_registry.count == 0
    assert not list(redis_client.scan_iter("rq:job:*"))  # RQ's success went after the results


def test_a_prefetch_trip_writes_as_each_job_ends_and_a_job_alone_ends_in_one_call(
        producer, redis_client, settings, sample_namespace, writes):
    """A prefetch's waiter waits on it: in a trip of four, each result is written as its job ends, but the
    last one's, which no job waits behind, goes with its success; so does a lone batch job's."""
    prefetch = producer.enqueue_many(_requests(sample_namespace, 4, "prefetch"))
    _worker(redis_client, settings, "prefetch", 4).work(burst=True, with_scheduler=False)
    lone = producer.enqueue(_requests(sample_namespace, 1, tag="lone")[0])
    _worker(redis_client, settings, "batch", 4).work(burst=True, with_scheduler=False)
    assert writes["own"] == [h.job_id for h in prefetch[:3]] and not any(writes["held"])
    assert writes["one_call"] == [[(prefetch[3].job_id, False)], [(lone.job_id, False)]]
    assert [r.status for r in producer.results_of([*prefetch, lone])] == ["ok"] * 5  # type: ignore[union-attr]


def test_a_lone_job_ends_in_one_round_trip_less(producer, redis_client, settings, sample_namespace, monkeypatch):
    """A job alone in its trip: its result, its waiters' wake-up and RQ's success are one script, so it
    sends one transaction fewer than a job ended the other way (result, then RQ's success transaction); RQ's
    records say finished and the result is there either way."""
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    sent = {}
    for way in ("one call", "the other way"):
        if way == "the other way":
            monkeypatch.setattr(trip_batching, "finish_held", lambda results, pipeline: None)
        handle = producer.enqueue(_requests(sample_namespace, 1, "prefetch", tag=way)[0])
        worker = _worker(redis_client, settings, "prefetch", 4)
        redis_client.config_resetstat()
        worker.work(burst=True, with_scheduler=False)
        sent[way] = _commands(redis_client)
        assert producer.result(handle).status == "ok"  # type: ignore[union-attr]
        assert queue.started_job_registry.count == 0 and queue.count == 0
        assert not redis_client.exists(f"rq:job:{handle.job_id}")  # ended: RQ's success forgot it (result_ttl 0)
        assert redis_client.hget(worker.key, "successful_job_count") == b"1"
        assert _ended(worker, "prefetch", "ok") == 1
    assert sent["the other way"]["exec"] - sent["one call"]["exec"] == 1
    assert sent["one call"]["evalsha"] == sent["the other way"]["evalsha"]  # the result's script, or the one call


def test_a_command_the_script_does_not_know_sends_the_trips_end_the_other_way(
        producer, redis_client, settings, sample_namespace, writes, monkeypatch):
    """RQ's bookkeeping with a command the one call does not run (here: none is known, as after an RQ release
    that sends a new kind): nothing goes in the script; the results are written in one pipeline, then RQ's
    success in its transaction, and every job ends once, ``ok``."""
    from ferret.worker.core import held_results

    monkeypatch.setattr(held_results, "_KEY_FIRST", frozenset())
    handles = producer.enqueue_many(_requests(sample_namespace, 3))
    _worker(redis_client, settings, "batch", 3).work(burst=True, with_scheduler=False)
    assert writes["one_call"] == []
    assert [sorted(trip) for trip in writes["held"] if trip] == [sorted((h.job_id, False) for h in handles)]
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 3  # type: ignore[union-attr]
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert queue.started_job_registry.count == 0 and not list(redis_client.scan_iter("rq:job:*"))


def test_a_result_redis_refuses_at_the_end_keeps_its_success_back(producer, redis_client, settings,
                                                                  sample_namespace, monkeypatch):
    """Redis refuses writes (full past ``maxmemory``) when a lone job ends: the script that writes its result
    and then RQ's success stops at the result, and the other way is refused too, so RQ's success is not
    sent: the job stays started under the worker, and the reaper runs it again once Redis takes writes."""
    handle = producer.enqueue(_requests(sample_namespace, 1, "prefetch")[0])
    finish, held_write = trip_batching.finish_held, trip_batching.write_held

    def full(results, pipeline):  # type: ignore[no-untyped-def]
        redis_client.config_set("maxmemory", 1)
        return finish(results, pipeline)

    def still_full(results):  # type: ignore[no-untyped-def]
        try:
            return held_write(results)
        finally:
            redis_client.config_set("maxmemory", 0)

    monkeypatch.setattr(trip_batching, "finish_held", full)
    monkeypatch.setattr(trip_batching, "write_held", still_full)
    refused = _worker(redis_client, settings, "prefetch", 4)
    refused.work(burst=True, with_scheduler=False)
    monkeypatch.undo()
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    assert producer.results_of([handle]) == [None]
    assert queue.started_job_registry.count == 1  # RQ's success would have taken it out
    redis_client.delete(refused.key, trip_batching_lock_key())
    _worker(redis_client, settings, "prefetch", 4).work(burst=True, with_scheduler=False)
    assert producer.result(handle).status == "ok"  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0


def test_a_job_past_its_deadline_is_written_at_once(producer, redis_client, settings, sample_namespace, writes):
    """A job already past its deadline (or within a second of it) is not held: a reaper ends a started job a
    second past its deadline + grace as overrun, and a held job is still started, so its ``expired`` is
    written as it ends (it runs first in its trip: earliest deadline first)."""
    requests = _requests(sample_namespace, 4)
    requests[2]["deadline_seconds"] = 0.000001
    handles = producer.enqueue_many(requests)
    _worker(redis_client, settings, "batch", 4).work(burst=True, with_scheduler=False)
    assert writes["own"] == [handles[2].job_id] and not any(writes["held"])
    assert [sorted(trip) for trip in writes["one_call"]] == [
        sorted((h.job_id, False) for h in handles if h is not handles[2])]
    assert [r.status for r in producer.results_of(handles)] == ["ok", "ok", "expired", "ok"]  # type: ignore[union-attr]


def test_held_results_are_written_before_a_job_with_a_later_deadline_starts(producer, redis_client, settings,
                                                                          sample_namespace, writes):
    """A job may run until its own deadline, and a held job is still started: so results are held only past
    the start of a job whose deadline is within a second of theirs. Here the 60 s job runs first (earliest
    deadline first) and its result is written (with its success) before the 600 s ones start; those two are
    written together."""
    requests = _requests(sample_namespace, 3)
    requests[2]["deadline_seconds"] = 60
    handles = producer.enqueue_many(requests)
    _worker(redis_client, settings, "batch", 3).work(burst=True, with_scheduler=False)
    assert writes["own"] == [] and not any(writes["held"])
    assert [sorted(trip) for trip in writes["one_call"]] == [
        [(handles[2].job_id, False)], sorted((h.job_id, False) for h in handles[:2])]
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 3  # type: ignore[union-attr]


def test_each_held_write_has_the_outcome_of_a_jobs_own(producer, redis_client, settings, sample_namespace):
    """In one trip: a job another run had already answered (its answer stands, this one is dropped and not
    reported), a job whose payload names a trace id another job's trace holds (written under a new one),
    and a plain one. The trace id taken stops the one call before RQ's success: the results go the other way,
    then the success."""
    handles = producer.enqueue_many(_requests(sample_namespace, 3))
    earlier = RetrievalResult(job_id=handles[0].job_id, request_id=handles[0].request_id,
                              namespace=sample_namespace, queue="batch", status="failed", error="an earlier run",
                              trace_id=handles[0].trace_id, timestamps=Timestamps(enqueued_at=1.0, deadline_at=2.0))
    ResultStore(redis_client).write(earlier, None)
    redis_client.set(keys.trace(handles[1].trace_id), b"another job's trace")
    worker = _worker(redis_client, settings, "batch", 3)
    worker.work(burst=True, with_scheduler=False)
    first, second, third = producer.results_of(handles)
    assert first.status == "failed" and first.error == "an earlier run"  # type: ignore[union-attr]
    assert second.status == "ok" and second.trace_id not in (None, handles[1].trace_id)  # type: ignore[union-attr]
    assert redis_client.get(keys.trace(handles[1].trace_id)) == b"another job's trace"
    assert producer.trace(handles[1].job_id)["trace_id"] == second.trace_id  # type: ignore[union-attr]
    assert third.status == "ok" and third.trace_id == handles[2].trace_id  # type: ignore[union-attr]
    assert _ended(worker, "batch", "ok") == 2 and _ended(worker, "batch", "failed") == 0


def test_held_results_are_written_after_redis_lost_its_scripts(producer, redis_client, settings,
                                                               sample_namespace, monkeypatch, writes):
    """A restart between the jobs and the trip's end empties Redis's script cache: the one call answers
    NOSCRIPT; the script is loaded and sent again, and all four end in it. Written the other way (the one
    call not made), every held write answers NOSCRIPT; the script is loaded and they are sent again, together."""
    handles = producer.enqueue_many(_requests(sample_namespace, 8))
    held_write, finish = trip_batching.write_held, trip_batching.finish_held

    def after_a_restart(results):  # type: ignore[no-untyped-def]
        redis_client.script_flush()
        return held_write(results)

    def one_call_after_a_restart(results, pipeline):  # type: ignore[no-untyped-def]
        redis_client.script_flush()
        return finish(results, pipeline)

    monkeypatch.setattr(trip_batching, "finish_held", one_call_after_a_restart)
    worker = _worker(redis_client, settings, "batch", 4)
    worker.work(burst=True, max_jobs=4, with_scheduler=False)
    monkeypatch.setattr(trip_batching, "finish_held", lambda results, pipeline: None)
    monkeypatch.setattr(trip_batching, "write_held", after_a_restart)
    worker.work(burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 8  # type: ignore[union-attr]
    assert _ended(worker, "batch", "ok") == 8 and writes["own"] == []


def test_a_worker_lost_with_results_held_loses_no_job(producer, redis_client, settings, sample_namespace,
                                                      monkeypatch):
    """A worker runs a trip of four and dies before its end (nothing held is written, no success sent):
    the four are in the started registry under its name, so the next worker's reaper runs them again, and
    each ends once, ``ok``."""
    handles = producer.enqueue_many(_requests(sample_namespace, 4))
    lost = _worker(redis_client, settings, "batch", 4)
    monkeypatch.setattr(lost, "send_kept_back", lambda idle=False: None)  # killed before the trip's end
    lost.work(burst=True, max_jobs=4, with_scheduler=False)
    monkeypatch.undo()
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert producer.results_of(handles) == [None] * 4
    assert queue.started_job_registry.count == 4
    redis_client.delete(lost.key, trip_batching_lock_key())
    survivor = _worker(redis_client, settings, "batch", 4)
    survivor.work(burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 4  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0


def test_results_that_cannot_be_written_keep_their_jobs_success_back(producer, redis_client, settings,
                                                                      sample_namespace, monkeypatch):
    """Redis out of reach at the trip's end (past the client's retries): the results held are not written,
    and their jobs' success is not sent later either (it would end them with no result): they stay started
    under the worker, and the reaper runs them again."""
    handles = producer.enqueue_many(_requests(sample_namespace, 4))

    def out_of_reach(results):  # type: ignore[no-untyped-def]
        if results:
            raise redis.ConnectionError("Redis out of reach")
        return []

    monkeypatch.setattr(trip_batching, "write_held", out_of_reach)
    monkeypatch.setattr(trip_batching, "finish_held", lambda results, pipeline: out_of_reach(results))
    cut_off = _worker(redis_client, settings, "batch", 4)
    cut_off.work(burst=True, with_scheduler=False)
    monkeypatch.undo()
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    assert producer.results_of(handles) == [None] * 4
    assert queue.started_job_registry.count == 4 and queue.finished_job_registry.count == 0
    redis_client.delete(cut_off.key, trip_batching_lock_key())
    _worker(redis_client, settings, "batch", 4).work(burst=True, with_scheduler=False)
    assert [r.status for r in producer.results_of(handles)] == ["ok"] * 4  # type: ignore[union-attr]
    assert queue.started_job_registry.count == 0


def trip_batching_lock_key() -> str:
    from ferret.rq_layer.reaper import LOCK_KEY
    return LOCK_KEY
