"""Redis at ``maxmemory`` (noeviction) during a batch, and ``--resume`` after
RQ ended a job without a Ferret result; a real redis-server and real workers
of both classes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry

from ferret import keys
from ferret.ingest import parse_memory_lines
from ferret.job_ids import job_id_for
from ferret.producer.batch import derived_request_id, recorded_run
from ferret.worker.backends.local import MemoryStore
from tests.conftest import ROOT, SAMPLE, RedisServer

pytestmark = pytest.mark.timeout(240)

FULL_SECONDS = 12  # longer than a client's ~10 s of retries for a dropped connection


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path)
    client = redis.Redis.from_url(server.url)
    memories, _ = parse_memory_lines(SAMPLE.read_text().splitlines())
    MemoryStore(client, "sample").upsert(memories)
    yield server, client
    client.close()
    server.stop()


def _env(url: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FERRET_")},
            "FERRET_REDIS__URL": url, "PYTHONPATH": str(ROOT)}


def _ferret(*args: str) -> list[str]:
    return [sys.executable, "-m", "ferret.cli.main", *args]


def _rows(path) -> list[dict]:
    """The complete lines written so far (the batch may be in the middle of writing the last one)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.split("\n")[:-1] if line.strip()]


def _stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        process.wait(timeout=20)


def _still_waiting(batch: subprocess.Popen) -> None:
    """The batch has not given up while Redis is full; if it has, what it said."""
    if batch.poll() is not None:
        _, said = batch.communicate(timeout=10)
        pytest.fail(f"the batch gave up while Redis was full: {said[-3000:]}")


def test_a_batch_rides_out_redis_out_of_memory(tmp_path, own_redis):
    server, admin = own_redis
    env = _env(server.url)
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"query": f"BTC thesis {i}", "namespace": "sample"}) + "\n"
                              for i in range(2000)))
    logs = [tmp_path / f"{kind}.log" for kind in ("simple", "fork")]  # files: a worker logs a line a job, and a
    workers = [subprocess.Popen(_ferret("worker", "--worker-class", kind), env=env,  # pipe nobody reads fills up
                                stderr=log.open("wb")) for kind, log in zip(("simple", "fork"), logs, strict=True)]
    batch = subprocess.Popen(_ferret("batch", str(source), "--out", str(out), "--wait", "200"), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_rows(out)) < 200:
            time.sleep(0.05)
        admin.config_set("maxmemory", 1)  # every write refused: OOM command not allowed
        time.sleep(FULL_SECONDS)
        for process in workers:
            assert process.poll() is None, "a worker exited while Redis was full"
        _still_waiting(batch)
        admin.config_set("maxmemory", 0)
        _, stderr = batch.communicate(timeout=180)
        assert batch.returncode == 0, stderr[-3000:]
        rows = _rows(out)
        ids = [row["request_id"] for row in rows]
        assert len(ids) == len(set(ids)) == 2000, "every line exactly once, by itself"
        assert {row["status"] for row in rows} == {"ok"}, {row.get("error") for row in rows if row["status"] != "ok"}
        assert stderr.count("is out of memory") <= 1 and "Traceback" not in stderr, stderr[-3000:]
        for process in workers:
            assert process.poll() is None, "workers carried on by themselves"
    finally:
        admin.config_set("maxmemory", 0)
        _stop(workers)
    # Each met the full Redis (a job start is a write), said so once per process (a forking
    # worker's work horse is a process of its own) and once when it ended, and carried on.
    for kind, path in zip(("simple", "fork"), logs, strict=True):
        log = path.read_text()
        full, room = log.count("is out of memory"), log.count("has room again")
        assert full == room and (full == 1 if kind == "simple" else 1 <= full <= 2), log[-3000:]
        assert "Traceback" not in log, log[-3000:]


def test_a_batch_started_while_redis_is_full_waits_for_room_then_finishes(tmp_path, own_redis):
    """Its enqueues meet the full Redis: they wait, said once, and the batch ends by itself when memory comes
    back, every line once. (The enqueue's writes went out in a pipeline whose refusals came back as replies:
    the batch ended with a traceback. Most likely what the batch above met once, when a busy machine left it
    still enqueueing as Redis filled up; that run kept no output.)"""
    server, admin = own_redis
    env = _env(server.url)
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"query": f"BTC thesis {i}", "namespace": "sample"}) + "\n"
                              for i in range(300)))
    worker = subprocess.Popen(_ferret("worker"), env=env, stderr=subprocess.DEVNULL)
    try:
        admin.config_set("maxmemory", 1)  # every write refused: OOM command not allowed
        batch = subprocess.Popen(_ferret("batch", str(source), "--out", str(out), "--wait", "120"), env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(5)
        _still_waiting(batch)
        assert _rows(out) == []
        admin.config_set("maxmemory", 0)
        _, stderr = batch.communicate(timeout=150)
        assert batch.returncode == 0, stderr[-3000:]
        rows = _rows(out)
        assert sorted(row["line"] for row in rows) == list(range(1, 301))
        assert {row["status"] for row in rows} == {"ok"}
        assert stderr.count("is out of memory") == 1 and stderr.count("has room again") == 1, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
    finally:
        admin.config_set("maxmemory", 0)
        _stop([worker])


@pytest.mark.parametrize("lines_per_job", [1, 16])
def test_resume_reenqueues_a_request_rq_ended_without_a_ferret_result(tmp_path, own_redis, lines_per_job):
    """One RQ job a line, and lines in a carrier (ferret.carriers): RQ ended the carrier, so all its lines."""
    server, admin = own_redis
    env = {**_env(server.url), "FERRET_SERVICE__BATCH_LINES_PER_JOB": str(lines_per_job)}
    lines = [json.dumps({"query": f"BTC thesis {i}", "namespace": "sample"}) for i in range(5)]
    source, out = tmp_path / "lost.jsonl", tmp_path / "out.jsonl"
    source.write_text("\n".join(lines) + "\n")
    first = subprocess.run(_ferret("batch", str(source), "--out", str(out), "--wait", "0.5"), env=env,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 5 and _rows(out) == []  # no worker yet: all unfinished (exit 5: not yet)
    # RQ ended line 3's job as failed (say, a worker died under OOM) and no Ferret result was written.
    lost = job_id_for("sample", derived_request_id(recorded_run(out), 3, lines[2]))
    carrier = admin.get(keys.carried_by(lost))
    assert (carrier is not None) == (lines_per_job > 1)
    lost = carrier.decode() if carrier is not None else lost  # the RQ job that runs line 3
    queue = Queue("batch", connection=admin)
    assert admin.llen(queue.key) == (1 if lines_per_job > 1 else 5)
    assert admin.lrem(queue.key, 1, lost) == 1
    job = Job.fetch(lost, connection=admin)
    job.set_status(JobStatus.FAILED)
    FailedJobRegistry(queue=queue).add(job, exc_string="work horse died")
    workers = [subprocess.Popen(_ferret("worker", "--worker-class", kind), env=env) for kind in ("simple", "fork")]
    try:
        resumed = subprocess.run(_ferret("batch", str(source), "--out", str(out), "--resume", "--wait", "60"),
                                 env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        rows = _rows(out)
        assert sorted(row["line"] for row in rows) == [1, 2, 3, 4, 5]
        assert {row["status"] for row in rows} == {"ok"}
    finally:
        _stop(workers)
