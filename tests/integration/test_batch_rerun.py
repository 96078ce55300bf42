"""Re-running stored queries after a change (ferret batch) computes them anew, with real workers: a memory
written between two runs shows in the second; a line that names its own request id is answered by its
earlier job and said so; the file's name decides nothing; an interrupted run says how to finish it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from ferret.records import Memory
from ferret.worker.backends.local import MemoryStore


def _batch(env, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", "batch", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _rows(path) -> list[dict]:
    """The output's rows in input order (they are written as they finish; each names its line)."""
    return sorted((json.loads(line) for line in path.read_text().splitlines()), key=lambda row: row["line"])


def test_a_second_run_after_a_memory_change_computes_every_line_anew(tmp_path, env, redis_client,
                                                                     sample_namespace, start_workers):
    start_workers(1)
    source = tmp_path / "ft_in_w+30s.jsonl"  # a name no request id could be made of: it no longer matters
    queries = ["zebra migration notes", "BTC thesis", "SOL trade"]
    source.write_text("".join(json.dumps({"query": q, "namespace": sample_namespace}) + "\n" for q in queries))
    first = _batch(env, str(source), "--out", str(tmp_path / "r1.jsonl"), "--wait", "60")
    assert first.returncode == 0, first.stderr
    MemoryStore(redis_client, sample_namespace).upsert(
        [Memory(id="zebra", content_title="Zebra migration notes", content_body="The zebra migration starts in July")])
    second = _batch(env, str(source), "--out", str(tmp_path / "r2.jsonl"), "--wait", "60")
    assert second.returncode == 0, second.stderr
    one, two = _rows(tmp_path / "r1.jsonl"), _rows(tmp_path / "r2.jsonl")
    assert {r["job_id"] for r in one}.isdisjoint({r["job_id"] for r in two})  # new jobs, run by the workers
    assert "zebra" not in [r["id"] for r in one[0]["results"]]
    assert two[0]["results"][0]["id"] == "zebra"  # the change is in the answer
    summary = json.loads(second.stdout.splitlines()[-1])
    assert summary["enqueued"] == 3 and summary["reused"] == 0 and summary["run"] != json.loads(
        first.stdout.splitlines()[-1])["run"]
    assert "new run" in second.stderr


def test_a_line_with_its_own_request_id_is_answered_by_its_earlier_job_and_counted(tmp_path, env,
                                                                                    sample_namespace, start_workers):
    start_workers(1)
    source = tmp_path / "named.jsonl"
    source.write_text(json.dumps({"query": "BTC thesis", "namespace": sample_namespace, "request_id": "q-1"}) + "\n"
                      + json.dumps({"query": "SOL trade", "namespace": sample_namespace}) + "\n")
    assert _batch(env, str(source), "--out", str(tmp_path / "a.jsonl"), "--wait", "60").returncode == 0
    again = _batch(env, str(source), "--out", str(tmp_path / "b.jsonl"), "--wait", "60")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["reused"] == 1
    assert "1 reused" in again.stderr and "drop or change the request_id" in again.stderr
    first, second = _rows(tmp_path / "a.jsonl"), _rows(tmp_path / "b.jsonl")
    assert second[0]["reused"] is True and second[0]["job_id"] == first[0]["job_id"]
    assert "reused" not in second[1] and second[1]["job_id"] != first[1]["job_id"]


def test_resume_needs_a_recorded_run(tmp_path, env):
    source = tmp_path / "q.jsonl"
    source.write_text(json.dumps({"query": "x"}) + "\n")
    refused = _batch(env, str(source), "--out", str(tmp_path / "never.jsonl"), "--resume")
    assert refused.returncode == 2 and "--resume" in refused.stderr and "run without --resume" in refused.stderr


def test_a_run_stopped_while_enqueueing_says_how_to_finish_it(tmp_path, env, sample_namespace):
    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"query": f"BTC thesis {i}", "namespace": sample_namespace}) + "\n"
                              for i in range(3000)))
    out = tmp_path / "out.jsonl"
    running = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out", str(out)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "out.jsonl.run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # some lines enqueued, not all (no worker runs: nothing finishes)
    running.send_signal(signal.SIGTERM)
    _, stderr = running.communicate(timeout=60)
    assert running.returncode == 130, stderr
    assert f"--out {out} --resume" in stderr


def test_results_whose_announcement_was_lost_are_still_collected(tmp_path, producer, sample_namespace,
                                                                 start_workers, monkeypatch):
    """Pub/sub is at most once: with every announcement lost (the batch listens where nothing is said),
    the stall path reads the results anyway, and every line gets its answer."""
    from ferret.producer import batch

    real = producer.client.pubsub

    def deaf(**kwargs):  # type: ignore[no-untyped-def]
        listener = real(**kwargs)
        listener.psubscribe = lambda *_patterns: type(listener).psubscribe(listener, "nothing-is-said-here")
        return listener

    monkeypatch.setattr(producer.client, "pubsub", deaf)
    start_workers(1)
    lines = [json.dumps({"query": f"BTC thesis {n}", "namespace": sample_namespace}) for n in range(5)]
    summary = batch.run_batch(producer, lines, tmp_path / "out.jsonl", wait_seconds=120)
    assert summary.by_status == {"ok": 5} and summary.unfinished == 0
    assert sorted(row["line"] for row in _rows(tmp_path / "out.jsonl")) == [1, 2, 3, 4, 5]


def test_a_batch_longer_than_its_deadline_keeps_a_window_in_flight_and_ends_all_ok(tmp_path, env, sample_nous,
                                                                                     start_workers):
    """More lines than one worker can run within a line's deadline: every line enqueued first waited in the
    queue until its deadline had passed (the tail of a big batch ended ``expired``). The batch keeps only the
    lines the worker drains in a share of the deadline in flight: every line ends ``ok``, no ``--resume``."""
    from ferret.worker.fakes.nous_server import nous_env

    sample_nous.delay, sample_nous.slow_terms = 0.03, {"thesis"}  # each search of a line: a few dozen lines a second
    deadline = 20
    lines = 1_200  # several deadlines' worth of work for one worker
    settings_env = {**env, **nous_env(sample_nous, timeout_seconds=30),
                    "FERRET_SERVICE__BATCH_DEADLINE_SECONDS": str(deadline)}
    start_workers(1, extra_env=settings_env)
    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"query": f"BTC thesis {i}"}) + "\n" for i in range(lines)))
    began = time.monotonic()
    done = _batch(settings_env, str(source), "--out", str(tmp_path / "many.out.jsonl"), "--wait", "120",
                  timeout=900)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["by_status"] == {"ok": lines}, summary
    assert took > 1.5 * deadline, f"the work outlasts a deadline ({took:.0f} s), or the test shows nothing"


def test_results_written_to_the_output_leave_redis_soon_unless_kept(tmp_path, env, redis_client, sample_namespace,
                                                                    start_workers):
    """What a batch leaves in Redis is bounded: a line's result (its trace, its wake-up list) once in the
    output stays a minute, not the result TTL's hour; ``--keep-results`` keeps it, and so does a line that
    named its own request id (others may wait on that job)."""
    from ferret import keys
    from ferret.producer.batch import KEPT_AFTER_WRITTEN_SECONDS

    start_workers(1)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"query": "BTC thesis", "namespace": sample_namespace}) + "\n"
                      + json.dumps({"query": "SOL trade", "namespace": sample_namespace, "request_id": "mine"}) + "\n")
    ttls = {}
    for name, extra in (("short", ()), ("kept", ("--keep-results",))):
        done = _batch(env, str(source), "--out", str(tmp_path / f"{name}.jsonl"), "--wait", "60", *extra)
        assert done.returncode == 0, done.stderr
        rows = {row["request_id"]: row for row in _rows(tmp_path / f"{name}.jsonl")}
        derived = next(row for request_id, row in rows.items() if request_id != "mine")
        ttls[name] = (redis_client.ttl(keys.result(derived["job_id"])),
                      redis_client.ttl(keys.trace(derived["trace_id"])),
                      redis_client.ttl(keys.result(rows["mine"]["job_id"])))
    assert 0 < ttls["short"][0] <= KEPT_AFTER_WRITTEN_SECONDS and 0 < ttls["short"][1] <= KEPT_AFTER_WRITTEN_SECONDS
    assert ttls["short"][2] > KEPT_AFTER_WRITTEN_SECONDS  # its own request id: kept
    assert ttls["kept"][0] > KEPT_AFTER_WRITTEN_SECONDS and ttls["kept"][1] > KEPT_AFTER_WRITTEN_SECONDS
