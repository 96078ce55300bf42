"""Hostile queue entries written into Redis by hand, served by real workers
of both classes: nothing but Ferret's job runs, no entry stops a worker, a
refused entry is noted (refusal log, metric, RQ's failed registry) with nothing
written under the job id it names, and the next job ends ``ok``."""

from __future__ import annotations

import json
import re
import time
import zlib
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from rq import Callback, Queue
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.serializers import JSONSerializer

from ferret.contract import JOB_FUNCTION
from ferret.errors import InvalidRequest
from ferret.job_ids import job_id_for
from ferret.producer.client import Producer
from ferret.worker.core.results import REFUSAL_LOG
from tests.conftest import free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["simple", "fork"])
def worker_class(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def serve(start_workers, worker_class):
    """Start one worker of the class under test with a metrics port; return (process, port)."""
    def start(extra_env: dict[str, str] | None = None, *args: str):
        port = free_port()
        [proc] = start_workers(1, "--worker-class", worker_class, "--metrics-port", str(port), *args,
                               extra_env=extra_env)
        return proc, port
    return start


def payload(query: str = "BTC thesis", namespace: str = "sample", request_id: str | None = None,
            trace_id: str | None = None) -> dict:
    now = time.time()
    request: dict = {"query": query, "namespace": namespace}
    if request_id is not None:
        request["request_id"] = request_id
    body: dict = {"request": request, "enqueued_at": now, "deadline_at": now + 20}
    if trace_id is not None:
        body["trace_id"] = trace_id
    return body


def refused_counts(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        if family.name == "ferret_refused_entries":
            return {s.labels["reason"]: s.value for s in family.samples if s.name.endswith("_total")}
    raise AssertionError("ferret_refused_entries_total is not exported")


def next_job_is_ok(producer: Producer, proc) -> None:
    handle = producer.enqueue({"query": "BTC thesis", "namespace": "sample"})
    result = producer.wait(handle, 20)
    assert result is not None and result.status == "ok", result
    assert proc.poll() is None, "the worker stopped"


def refused_entry(producer: Producer, job_id: str, reason: str, words: str) -> dict:
    """The entry was refused: noted in the refusal log, and nothing written under its job id
    (whoever owns that id may still send its request)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        logged = [json.loads(raw) for raw in producer.client.lrange(REFUSAL_LOG, 0, -1)]
        found = [entry for entry in logged if entry["job_id"] == job_id]
        if found:
            assert found[0]["reason"] == reason and words in found[0]["message"], found
            assert producer.result(job_id) is None, "a refusal wrote a result under the id it names"
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no refusal of {job_id} noted")


def test_only_ferrets_job_function_runs(producer, sample_namespace, serve, redis_client, tmp_path):
    marker, imported = tmp_path / "ran", tmp_path / "imported"
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "hostile_module.py").write_text(f"open({str(imported)!r}, 'w').close()\ndef run(*a): pass\n")
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    foreign = [
        queue.enqueue_call("os.system", args=(f"touch {marker}",)),
        queue.enqueue_call("hostile_module.run", args=({"x": 1},)),  # importing it would create `imported`
        queue.enqueue_call(JOB_FUNCTION, args=(payload(),), on_failure=Callback("hostile_module.run")),
    ]
    bad_shape = [
        queue.enqueue_call(JOB_FUNCTION, args=(payload(),), kwargs={"extra": 1}),
        queue.enqueue_call(JOB_FUNCTION, args=(payload(), payload())),
        queue.enqueue_call(JOB_FUNCTION, args=()),
    ]
    proc, port = serve({"PYTHONPATH": f"{module_dir}:{Path(__file__).resolve().parents[2]}"})
    next_job_is_ok(producer, proc)
    for job in foreign:
        refused_entry(producer, job.id, "not_ferret_job", "not a Ferret job")
    for job in bad_shape:
        refused_entry(producer, job.id, "bad_arguments", "exactly one payload object")
    assert not marker.exists() and not imported.exists()
    failed = FailedJobRegistry("prefetch", connection=redis_client)
    for job in foreign + bad_shape:
        assert job.get_status(refresh=True) == JobStatus.FAILED
        assert job.id in failed.get_job_ids()
        latest = Job.fetch(job.id, connection=redis_client, serializer=JSONSerializer).latest_result()
        assert latest is not None and "refused by Ferret" in (latest.exc_string or "")
    counts = refused_counts(port)
    assert counts["not_ferret_job"] == 3 and counts["bad_arguments"] == 3


def _hash(client: redis.Redis, job_id: str, **fields: bytes | str) -> None:
    client.hset(f"rq:job:{job_id}", mapping={"status": "queued", "origin": "prefetch", **fields})


def test_entries_that_used_to_stop_a_worker(producer, sample_namespace, serve, redis_client):
    ids = {name: job_id_for("sample", name) for name in ("no-hash", "no-data", "bad-utf8", "bad-date",
                                                          "wrong-type", "not-rq-data", "other-queue")}
    _hash(redis_client, ids["no-data"], description="x")
    _hash(redis_client, ids["bad-utf8"], data=zlib.compress(b"\xff\xfe not utf-8"))
    _hash(redis_client, ids["bad-date"], data=zlib.compress(b'["ferret.rq_layer.entry.run_retrieval", null, [{}], {}]'),
          created_at="yesterday", status="bogus")
    redis_client.set(f"rq:job:{ids['wrong-type']}", "a string, not a hash")
    _hash(redis_client, ids["not-rq-data"], data=zlib.compress(b'{"func": "os.system"}'))
    _hash(redis_client, ids["other-queue"], origin="batch",
          data=zlib.compress(b'["ferret.rq_layer.entry.run_retrieval", null, [{}], {}]'))
    bad_ids = [b"bad.id", b"../../x", b"\xff\xfe", b"", b"a" * 5000 + b"!"]
    redis_client.rpush("rq:queue:prefetch", *bad_ids, *ids.values())
    proc, port = serve(None, "--queues", "prefetch")  # one queue: entries pass through RQ's intermediate queue
    next_job_is_ok(producer, proc)
    refused_entry(producer, ids["no-hash"], "no_job_hash", "has no job hash")
    refused_entry(producer, ids["no-data"], "no_job_hash", "has no data")
    refused_entry(producer, ids["bad-utf8"], "malformed_job", "cannot be read")
    refused_entry(producer, ids["bad-date"], "malformed_job", "cannot be read")
    refused_entry(producer, ids["wrong-type"], "malformed_job", "cannot be read")
    refused_entry(producer, ids["not-rq-data"], "malformed_job", "cannot be read")
    refused_entry(producer, ids["other-queue"], "malformed_job", "belongs to queue")
    counts = refused_counts(port)
    assert counts["bad_id"] == len(bad_ids)
    assert counts["no_job_hash"] == 2 and counts["malformed_job"] == 5
    assert redis_client.llen("rq:queue:prefetch") == 0
    intermediate = Queue("prefetch", connection=redis_client).intermediate_queue_key
    assert redis_client.llen(intermediate) == 0  # nothing left for RQ's maintenance to trip on


def test_a_job_is_only_served_to_the_tenant_it_belongs_to(producer, sample_namespace, serve, redis_client):
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    # Tenant A's request pre-queued under the id tenant B's request "r1" will get.
    stolen = job_id_for("tenant-b", "r1")
    queue.enqueue_call(JOB_FUNCTION, args=(payload(namespace="sample", request_id="r1"),), job_id=stolen)
    # A request with no request id under a derived (not random) id.
    derived = job_id_for("sample", "r2")
    queue.enqueue_call(JOB_FUNCTION, args=(payload(namespace="sample"),), job_id=derived)
    proc, port = serve()
    next_job_is_ok(producer, proc)
    for job_id in (stolen, derived):
        refused_entry(producer, job_id, "tenant_mismatch", "does not belong")
    # Tenant B's own request under that id then runs: the refusal decided nothing for it.
    handle = producer.enqueue({"query": "BTC thesis", "namespace": "tenant-b", "request_id": "r1"})
    assert not handle.duplicate
    answer = producer.wait(handle, 20)
    assert answer.status == "ok" and answer.namespace == "tenant-b" and answer.job_id == stolen
    assert answer.results == []  # never tenant A's memories
    assert refused_counts(port)["tenant_mismatch"] == 2


def test_a_trace_belongs_to_one_job(producer, sample_namespace, serve, redis_client):
    proc, _ = serve()
    first = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    assert producer.wait(first, 20).status == "ok"
    before = producer.trace(first)
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    second = queue.enqueue_call(JOB_FUNCTION, args=(payload(trace_id=first.trace_id),),
                                job_id=job_id_for("sample", None))
    result = producer.wait(second.id, 20)
    assert result is not None and result.status == "ok"
    assert producer.trace(first) == before  # not overwritten
    assert result.trace_id != first.trace_id
    assert producer.trace(second.id)["job_id"] == second.id
    next_job_is_ok(producer, proc)


def test_trailing_newline_is_refused_at_producer_and_worker(producer, sample_namespace, serve, redis_client):
    for field, value in (("namespace", "tenant-b\n"), ("request_id", "r1\n")):
        with pytest.raises(InvalidRequest) as refused:
            producer.enqueue({"query": "BTC thesis", "namespace": "sample", field: value})
        assert refused.value.field == field
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    job = queue.enqueue_call(JOB_FUNCTION, args=(payload(namespace="tenant-b\n"),),
                             job_id=job_id_for("tenant-b\n", None))
    proc, _ = serve()
    refused_entry(producer, job.id, "malformed_job", "namespace")
    next_job_is_ok(producer, proc)


def test_hostile_registry_entries_neither_run_nor_stop_maintenance(producer, sample_namespace, serve,
                                                                    redis_client, tmp_path):
    imported = tmp_path / "imported"
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "hostile_module.py").write_text(f"open({str(imported)!r}, 'w').close()\ndef run(*a): pass\n")
    queue = Queue("prefetch", connection=redis_client, serializer=JSONSerializer)
    # An abandoned "started" job whose hash names a failure callback (RQ's own cleanup would run it).
    abandoned = queue.enqueue_call(JOB_FUNCTION, args=(payload(),), job_id=job_id_for("sample", None),
                                   on_failure=Callback("hostile_module.run"))
    redis_client.lrem(queue.key, 1, abandoned.id)
    redis_client.hset(abandoned.key, "worker_name", "long-gone")
    old = time.time() - 3600
    redis_client.zadd(StartedJobRegistry("prefetch", connection=redis_client).key,
                      {b"bad.id": old, b"\xff:x": old, f"{abandoned.id}:exec": old})
    # The intermediate queue (a single-queue worker's): junk, a foreign job, and a Ferret job stuck there.
    foreign = queue.enqueue_call("os.system", args=("true",))
    stuck = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    redis_client.lrem(queue.key, 1, foreign.id)
    redis_client.lrem(queue.key, 1, stuck.job_id)
    redis_client.rpush(queue.intermediate_queue_key, b"bad.id", b"\xff", foreign.id, stuck.job_id)
    env = {"PYTHONPATH": f"{module_dir}:{Path(__file__).resolve().parents[2]}",
           "FERRET_SERVICE__MAINTENANCE_INTERVAL_SECONDS": "1"}
    proc, port = serve(env, "--queues", "prefetch")  # one queue: RQ uses the intermediate queue
    result = producer.wait(stuck, 30)  # put back on the queue by the second maintenance pass
    assert result is not None and result.status == "ok", result
    refused_entry(producer, abandoned.id, "not_ferret_job", "callbacks")
    refused_entry(producer, foreign.id, "not_ferret_job", "not a Ferret job")
    next_job_is_ok(producer, proc)
    assert not imported.exists()
    started = redis_client.zrange(StartedJobRegistry("prefetch", connection=redis_client).key, 0, -1)
    assert not {b"bad.id", b"\xff:x", f"{abandoned.id}:exec".encode()} & set(started), started
    assert redis_client.llen(queue.intermediate_queue_key) == 0
    counts = refused_counts(port)
    assert counts["bad_id"] == 4 and counts["not_ferret_job"] == 2


def _bomb(size: int) -> bytes:
    """``size`` bytes of spaces, zlib-compressed (about a thousandth of that)."""
    inflater = zlib.compressobj(9)
    chunk = b" " * (1024 * 1024)
    return b"".join(inflater.compress(chunk) for _ in range(size // len(chunk))) + inflater.flush()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):  # the peak
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_zlib_bomb_is_refused_at_the_cap(producer, sample_namespace, serve, redis_client):
    job_id = job_id_for("sample", "bomb")
    bomb = _bomb(512 * 1024 * 1024)
    assert len(bomb) < 600_000
    _hash(redis_client, job_id, data=bomb)
    proc, port = serve()
    next_job_is_ok(producer, proc)
    peak = _rss_mb(proc.pid)
    redis_client.rpush("rq:queue:prefetch", job_id)
    deadline = time.monotonic() + 20
    while refused_counts(port).get("data_too_large", 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert refused_counts(port)["data_too_large"] == 1
    next_job_is_ok(producer, proc)
    assert _rss_mb(proc.pid) - peak < 200, "the worker inflated the bomb"  # 512 MiB if it had


def test_a_flood_of_junk_entries_is_counted_in_full_and_logged_in_a_few_lines(producer, sample_namespace,
                                                                             redis_client, env, tmp_path):
    """3,000 junk entries: every one refused and counted by the metric, the worker's log a few lines
    (the first of each kind, then a count: ferret.repeated_lines), not a line or two per entry."""
    import subprocess
    import sys

    junk = 3_000
    queue = Queue("batch", connection=redis_client, serializer=JSONSerializer)
    redis_client.rpush(queue.key, *[f"no-such-job-{n}" for n in range(junk)])
    port = free_port()
    log = tmp_path / "worker.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--metrics-port", str(port)],
                                env=env, stderr=err)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    if sum(refused_counts(port).values()) >= junk:
                        break
                except (httpx.HTTPError, AssertionError):
                    pass
                time.sleep(0.2)
            assert sum(refused_counts(port).values()) == junk
            next_job_is_ok(producer, proc)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    lines = [line for line in log.read_text().splitlines() if "refused" in line]
    assert 1 <= len(lines) <= 30, f"{len(lines)} lines about refusals for {junk} entries"
    said = 0  # every entry is in the log, said or counted: a line says itself and the count it carries
    for line in lines:
        held = re.search(r"\(and (\d+) more like it", line)
        at_stop = re.search(r"(\d+) more refused", line)
        said += int(at_stop.group(1)) if at_stop else 1 + (int(held.group(1)) if held else 0)
    assert said == junk, lines
