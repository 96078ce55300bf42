"""Batch lines in carriers (``ferret.carriers``): several lines an RQ job, each line still its own request.
Every line ends once on both worker classes; a line's state is its carrier's; a worker killed mid-carrier
loses no line; the reaper ends only the lines without a result; a hostile carrier is refused whole, a hostile
member alone. Real redis-server; real worker processes, and RQ workers run in this process where a test
needs to see inside one."""

from __future__ import annotations

import os
import signal
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from rq import Queue
from rq.job import Job
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.serializers import JSONSerializer

from ferret import keys
from ferret.carriers import carrier_payload, new_carrier_id
from ferret.contract import parse_request
from ferret.envelope import JobEnvelope
from ferret.job_ids import job_id_for
from ferret.producer.client import Producer
from ferret.rq_layer import reaper
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.signing import sign_job
from ferret.tracing import new_trace_id
from ferret.worker.core.resources import build_resources
from ferret.worker.fakes.nous_server import nous_env
from ferret.worker.metrics import FerretMetrics
from tests.timing import scaled

PER_JOB = "4"


def _lines(namespace: str | None, count: int, tag: str = "", slow: int | None = None) -> list[dict[str, Any]]:
    lines = []
    for i in range(count):
        line: dict[str, Any] = {"query": f"BTC thesis {tag}{i}" + (" zzslow" if i == slow else ""),
                                "queue": "batch", "request_id": f"line-{tag}{i}", "deadline_seconds": 600}
        if namespace is not None:
            line["namespace"] = namespace
        lines.append(line)
    return lines


def _producer(redis_client, env: dict[str, str], **more: str) -> Producer:
    return Producer(redis_client, load_settings(environ={**env, "FERRET_SERVICE__BATCH_LINES_PER_JOB": PER_JOB,
                                                         **more}))


def _queue(redis_client) -> Queue:
    return Queue("batch", connection=redis_client, serializer=JSONSerializer)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_lines_ride_in_carriers_and_each_ends_once(redis_client, env, sample_namespace, start_workers,
                                                   worker_class):
    producer = _producer(redis_client, env)
    handles = producer.enqueue_carried(_lines(sample_namespace, 10))
    assert all(h is not None and not isinstance(h, Exception) for h in handles)
    assert _queue(redis_client).count == 3  # 4 + 4 + 2 lines, three RQ jobs
    first = handles[0]
    assert producer.status(first).rq_state == "queued"  # its carrier's state: RQ has no job of the line's own
    assert not producer.run(producer.rules.lost(first))  # a wait does not take it for lost
    start_workers(1, "--worker-class", worker_class)
    results = [producer.wait(h, scaled(30)) for h in handles]
    assert [r.status for r in results] == ["ok"] * 10
    assert [r.job_id for r in results] == [h.job_id for h in handles]
    assert all(r.results and r.trace_id == h.trace_id for r, h in zip(results, handles, strict=True))
    assert producer.status(first).status == "ok"
    assert FailedJobRegistry(queue=_queue(redis_client)).count == 0
    assert redis_client.get(keys.carried_by(first.job_id)) is not None  # the pointer lasts as the claim does


@pytest.mark.parametrize("lean", [True, False])
def test_a_worker_killed_mid_carrier_loses_no_line(redis_client, env, start_workers, sample_nous, lean):
    """The worker dies in the third line's (hung) search. Another worker's reaper runs the carrier again:
    every line ends ``ok``, once. A line answered before the death is not run again (stock bookkeeping:
    each line's result is written as it ends); the lean worker holds a carrier's results for the trip's
    end, so its answered lines died with it and run again."""
    sample_nous.slow_terms, sample_nous.delay = {"zzslow"}, 30.0
    worker_env = {**nous_env(sample_nous, timeout_seconds=60), "FERRET_SERVICE__WORKER_TTL_SECONDS": "5",
                  "FERRET_SERVICE__LEAN_BOOKKEEPING": "true" if lean else "false"}
    producer = _producer(redis_client, env)
    handles = producer.enqueue_carried(_lines(None, 4, slow=2))
    (victim,) = start_workers(1, extra_env=worker_env)
    until = time.monotonic() + scaled(30)
    while not any("zzslow" in str(body.get("query")) for _, body in list(sample_nous.requests)):
        assert time.monotonic() < until, "the third line's search never started"
        time.sleep(0.02)
    answered = [producer.result(h) is not None for h in handles]  # type: ignore[arg-type]
    assert answered == ([False] * 4 if lean else [True, True, False, False])
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    sample_nous.slow_terms = set()
    start_workers(1, extra_env=worker_env)
    results = [producer.wait(h, scaled(40)) for h in handles]  # type: ignore[arg-type]
    assert [r.status for r in results] == ["ok"] * 4
    searched = [str(body.get("query")) for path, body in sample_nous.requests if path == "/v1/search"]
    first_line = [q for q in searched if q.startswith("BTC thesis 0")]
    assert len(first_line) == (2 if lean else 1)


def test_a_killed_work_horse_ends_its_unanswered_lines_failed(redis_client, env, start_workers, sample_nous):
    """As a job whose horse dies ends ``failed`` at once: the carrier's lines without a result do, the lines
    answered before keep their results."""
    sample_nous.slow_terms, sample_nous.delay = {"zzslow"}, 30.0
    producer = _producer(redis_client, env)
    handles = producer.enqueue_carried(_lines(None, 4, slow=2))
    (parent,) = start_workers(1, "--worker-class", "fork", extra_env=nous_env(sample_nous, timeout_seconds=60))
    until = time.monotonic() + scaled(30)
    while not any("zzslow" in str(body.get("query")) for _, body in list(sample_nous.requests)):
        assert time.monotonic() < until, "the third line's search never started"
        time.sleep(0.02)
    children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()
    os.kill(int(children[0]), signal.SIGKILL)
    results = [producer.wait(h, scaled(20)) for h in handles]  # type: ignore[arg-type]
    assert [r.status for r in results] == ["ok", "ok", "failed", "failed"]
    assert all("work horse died" in (r.error or "") for r in results[2:])
    assert parent.poll() is None


def _started_carrier(producer: Producer, redis_client, namespace: str, deadline: float) -> list[Any]:
    """A carrier of four lines taken off its queue and started by a worker that is gone."""
    handles = producer.enqueue_carried([{**line, "deadline_seconds": deadline} for line in _lines(namespace, 4)])
    queue = _queue(redis_client)
    (carrier_id,) = queue.job_ids
    queue.remove(carrier_id)
    job = Job.fetch(carrier_id, connection=redis_client, serializer=JSONSerializer)
    job.worker_name = "gone-worker"
    job.save()
    redis_client.zadd(StartedJobRegistry(queue=queue).key, {carrier_id: time.time() + 600})
    return handles


def test_the_reaper_ends_only_a_lost_carriers_unanswered_lines(redis_client, env, settings, sample_namespace):
    producer = _producer(redis_client, env)
    handles = _started_carrier(producer, redis_client, sample_namespace, 600)
    ctx = build_resources(settings, redis_client)
    ctx.results.write(_ok_result(ctx, handles[0]), None)  # the first line was answered before the death
    written = reaper.reap(ctx, [_queue(redis_client)], now=time.time() + 10_000)  # long past its deadline
    assert sorted(r.job_id for r in written) == sorted(h.job_id for h in handles[1:])
    results = [producer.result(h) for h in handles]
    assert results[0].status == "ok" and results[0].error is None
    assert all(r.status == "failed" and "worker lost" in r.error for r in results[1:])


def test_the_reaper_runs_a_lost_carrier_again_and_its_answered_line_is_not_rerun(redis_client, env, settings,
                                                                                 sample_namespace):
    producer = _producer(redis_client, env)
    handles = _started_carrier(producer, redis_client, sample_namespace, 600)
    ctx = build_resources(settings, redis_client)
    first = _ok_result(ctx, handles[0])
    ctx.results.write(first, None)
    assert reaper.reap(ctx, [_queue(redis_client)]) == []  # time left: queued again, nothing written
    assert _queue(redis_client).count == 1
    worker = build_worker(redis_client, settings, ["batch"], metrics=FerretMetrics(CollectorRegistry()))
    worker.work(burst=True, with_scheduler=False)
    results = [producer.result(h) for h in handles]
    assert results[0] == producer.result(handles[0]) and results[0].worker == "written-by-the-test"
    assert [r.status for r in results] == ["ok"] * 4
    assert worker.ferret_metrics.jobs.labels("batch", "ok")._value.get() == 3  # the three it ran


def _ok_result(ctx, handle):
    from ferret.contract import RetrievalResult, Timestamps

    now = ctx.now()
    return RetrievalResult(job_id=handle.job_id, request_id=handle.request_id, namespace=handle.namespace,
                           queue="batch", status="ok", worker="written-by-the-test",
                           timestamps=Timestamps(enqueued_at=now, deadline_at=now + 600, finished_at=now))


def _put_carrier(producer: Producer, payload: dict[str, Any], carrier_id: str) -> None:
    commands = producer.rules.enqueue_commands("batch", payload, carrier_id, timeout=700, failure_ttl=600,
                                               now=producer.clock.time())
    with producer.client.pipeline(transaction=True) as pipe:
        for command in commands:
            pipe.execute_command(*command)
        pipe.execute()


def _member(producer: Producer, line: dict[str, Any], job_id: str | None = None) -> tuple[str, dict[str, Any]]:
    request = parse_request(line, producer.settings.limits)
    envelope = JobEnvelope.new(request, 600, memory_version=0, trace_id=new_trace_id(), now=producer.clock.time())
    return job_id or job_id_for(request.namespace, request.request_id), envelope.to_payload()


def _burst(redis_client, settings) -> Any:
    worker = build_worker(redis_client, settings, ["batch"], metrics=FerretMetrics(CollectorRegistry()))
    worker.work(burst=True, with_scheduler=False)
    return worker


def test_a_member_whose_id_is_not_its_requests_is_refused_alone(redis_client, producer, settings,
                                                               sample_namespace):
    lines = _lines(sample_namespace, 3)
    victim = job_id_for("someone-else", "their-line")  # tenant B's id on tenant A's request
    members = [_member(producer, lines[0]), _member(producer, lines[1], victim), _member(producer, lines[2])]
    _put_carrier(producer, carrier_payload(members), new_carrier_id())
    worker = _burst(redis_client, settings)
    assert producer.result(members[0][0]).status == "ok" and producer.result(members[2][0]).status == "ok"
    assert producer.result(victim) is None  # nothing written under the other tenant's id
    assert redis_client.get(keys.refusal(victim)) is None  # nor a refusal that would end its owner's wait
    assert b"tenant_mismatch" in redis_client.lindex(keys.refusal_log(), 0)
    assert worker.ferret_metrics.jobs.labels("batch", "ok")._value.get() == 2


@pytest.mark.parametrize("payload", [
    {"carrier": 1, "deadline_at": 9e9, "members": "all of them"},
    {"carrier": 1, "deadline_at": 9e9, "members": [["not-a-ferret-id", {}]]},
    {"carrier": 1, "deadline_at": 9e9, "members": [[job_id_for("sample", "x"), {}]] * 2},
    {"carrier": 2, "deadline_at": 9e9, "members": []},
], ids=["members-not-a-list", "foreign-id", "repeated-id", "wrong-version"])
def test_a_carrier_that_is_not_one_is_refused_whole(redis_client, producer, settings, payload):
    carrier_id = new_carrier_id()
    _put_carrier(producer, payload, carrier_id)
    worker = _burst(redis_client, settings)
    assert worker.ferret_metrics.refused.labels("malformed_job")._value.get() == 1
    assert FailedJobRegistry(queue=_queue(redis_client)).get_job_ids() == [carrier_id]
    assert not list(redis_client.scan_iter("ferret:result:*"))
    assert b"malformed_job" in redis_client.lindex(keys.refusal_log(), 0)


def test_a_signed_carrier_runs_and_a_forged_one_runs_no_line(redis_client, env, sample_namespace):
    key_env = {**env, "FERRET_SECURITY__SIGNING_KEY": "k" * 32}
    producer = _producer(redis_client, key_env)
    settings = producer.settings
    handles = producer.enqueue_carried(_lines(sample_namespace, 2, tag="signed"))
    _burst(redis_client, settings)
    assert [producer.result(h).status for h in handles] == ["ok", "ok"]  # type: ignore[union-attr]
    lines = _lines(sample_namespace, 2, tag="forged")
    members = [_member(producer, line) for line in lines]
    forged = sign_job(b"another key" * 3, "fr-c-" + "f" * 32, carrier_payload(members))
    _put_carrier(producer, forged, "fr-c-" + "f" * 32)
    worker = _burst(redis_client, settings)
    assert worker.ferret_metrics.refused.labels("bad_signature")._value.get() == 1
    assert all(producer.result(job_id) is None for job_id, _ in members)


def test_a_pointer_that_is_not_a_string_is_no_carrier(redis_client, env, sample_namespace):
    """Anyone can write to Redis: a line's pointer key holding a list is read as no pointer, not an error
    that ends the producer's check (the line then has no RQ job, as a line whose carrier is gone)."""
    producer = _producer(redis_client, env)
    first, second = producer.enqueue_carried(_lines(sample_namespace, 2, tag="typed"))
    redis_client.delete(keys.carried_by(first.job_id))
    redis_client.rpush(keys.carried_by(first.job_id), "fr-c-" + "0" * 32)
    assert producer.status(first).rq_state is None
    assert producer.run(producer.rules.lost(first))
    assert producer.status(second).rq_state == "queued"


def test_a_carrier_of_long_lines_stays_within_what_a_worker_inflates(redis_client, env, settings,
                                                                      sample_namespace):
    """Each line alone fits the workers' cap on a job's data (room for the largest request); 16 of them would
    not. The producer closes a carrier before one more line could take it past the cap: every carrier is
    read, every line ends ``ok``."""
    producer = _producer(redis_client, env)
    history = [{"role": "user", "content": "😀" * 4000}] * 10  # 12 bytes a character in RQ's JSON
    lines = [{**line, "history": history} for line in _lines(sample_namespace, 5, tag="long")]
    handles = producer.enqueue_carried(lines)
    cap = producer.settings.limits.job_data_cap()
    sizes = [len(zlib.decompress(redis_client.hget(f"rq:job:{carrier_id}", "data")))
             for carrier_id in _queue(redis_client).job_ids]
    assert len(sizes) == 3 and all(size <= cap for size in sizes), (sizes, cap)
    _burst(redis_client, settings)
    assert [producer.result(h).status for h in handles] == ["ok"] * 5  # type: ignore[union-attr]
