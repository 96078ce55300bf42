"""One exit-code table for every command (ferret.cli.exit_codes), and one
``error:`` line instead of a traceback, each driven in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from ferret.cli import exit_codes
from tests.conftest import free_port


def _ferret(args, env, timeout=120):
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("args", [["forget", "x", "-n", "a/b"], ["query", "BTC", "--wait", "-5"],
                                  ["batch", "--out", "o.jsonl", "--wait", "-1", __file__]])
def test_bad_usage_exits_2(env, args):
    run = _ferret(args, env)
    assert run.returncode == exit_codes.USAGE, run.stderr
    assert "Traceback" not in run.stderr


def test_unknown_ids_exit_4_from_result_and_trace(env):
    for command in ("result", "trace"):
        run = _ferret([command, "fr-0123456789abcdef0123456789abcdef"], env)
        assert run.returncode == exit_codes.NOT_FOUND, (command, run.stderr)


def test_a_bad_redis_url_is_one_error_line(env):
    for args in (["result", "x"], ["forget", "x"], ["ingest", "-"]):
        run = _ferret(args, {**env, "FERRET_REDIS__URL": "http://nope"})
        assert run.returncode == exit_codes.USAGE and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.startswith("error: invalid redis URL")


def test_a_closed_port_says_at_once_that_it_retries_and_where(env):
    url = f"redis://127.0.0.1:{free_port()}/0"
    process = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "result", "x"],
                               env={**env, "FERRET_REDIS__URL": url}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    first_line = process.stderr.readline()
    started = time.monotonic()
    assert "is not answering; retrying" in first_line and url.split("//")[1].split("/")[0] in first_line
    _, rest = process.communicate(timeout=60)
    assert process.returncode == exit_codes.UNAVAILABLE and "error: cannot reach Redis" in rest
    assert time.monotonic() - started > 1, "the first line came before the retries, not after"


def test_no_worker_serving_the_queue_is_said_in_plain_words(env, redis_client):
    # redis_client empties the shared server first: a worker an earlier test killed is still registered until
    # its key's TTL runs out (seen in CI: the message missing, the job still queued after the wait)
    run = _ferret(["query", "BTC thesis", "--wait", "1"], env)
    assert run.returncode == exit_codes.NOT_YET
    assert "no worker is serving queue prefetch" in run.stderr
    assert "no final result yet (RQ state queued)" in run.stdout
    late = _ferret(["query", "SOL trade", "--deadline", "0.2", "--wait", "1"], env)
    assert "its deadline passed" in late.stderr and "ends expired" in late.stderr, late.stderr
    assert "deadline passed" not in run.stderr  # the prefetch default, 5 s, had not passed after 1 s


def test_a_job_without_a_result_shows_status_and_rq_state_as_two_fields(env):
    enqueued = _ferret(["query", "BTC thesis", "--wait", "0", "--json"], env)
    assert enqueued.returncode == exit_codes.OK
    shown = json.loads(enqueued.stdout)
    assert shown["status"] is None and shown["rq_state"] == "queued"
    found = _ferret(["result", shown["job_id"], "--json"], env)
    assert found.returncode == exit_codes.NOT_YET
    assert json.loads(found.stdout) == {"job_id": shown["job_id"], "status": None, "rq_state": "queued"}
    text = _ferret(["result", shown["job_id"]], env)
    assert text.stdout.strip() == f"job {shown['job_id']}: no final result yet (RQ state queued)"
    assert "JobStatus" not in text.stdout + found.stdout


def test_final_statuses_give_their_exit_codes(env, start_workers, sample_namespace, tmp_path):
    enqueued = _ferret(["query", "BTC thesis", "-n", sample_namespace, "--deadline", "0.05", "--wait", "0",
                        "--json"], env)
    assert enqueued.returncode == exit_codes.OK, enqueued.stderr
    job_id = json.loads(enqueued.stdout)["job_id"]
    time.sleep(0.2)  # the deadline passes before any worker is up
    start_workers(1)
    queued_or_done = _ferret(["result", job_id], env)
    deadline = time.monotonic() + 20
    while queued_or_done.returncode == exit_codes.NOT_YET and time.monotonic() < deadline:
        time.sleep(0.1)
        queued_or_done = _ferret(["result", job_id], env)
    assert queued_or_done.returncode == exit_codes.PARTLY and "expired" in queued_or_done.stdout
    answered = _ferret(["query", "BTC thesis", "-n", sample_namespace], env)
    assert answered.returncode == exit_codes.OK, answered.stderr
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"query": "BTC thesis", "namespace": sample_namespace}) + "\n{not json\n")
    batch = _ferret(["batch", str(lines), "--out", str(tmp_path / "out.jsonl"), "--wait", "30"], env)
    assert batch.returncode == exit_codes.PARTLY, batch.stderr


def test_a_busy_metrics_port_is_one_error_line(env, taken_port):
    run = _ferret(["worker", "--metrics-port", str(taken_port), "--burst"], env)
    assert run.returncode == exit_codes.USAGE and "error: cannot serve metrics" in run.stderr
    assert "Traceback" not in run.stderr


def test_reusing_a_request_id_for_another_request_is_an_error_naming_it(env):
    first = _ferret(["query", "BTC thesis", "--request-id", "turn-7", "--wait", "0", "--json"], env)
    again = _ferret(["query", "BTC thesis", "--request-id", "turn-7", "--wait", "0", "--json"], env)
    assert first.returncode == again.returncode == exit_codes.OK
    assert json.loads(first.stdout)["job_id"] == json.loads(again.stdout)["job_id"], "the same request is one job"
    other = _ferret(["query", "SOL trade", "--request-id", "turn-7", "--wait", "0"], env)
    assert other.returncode == exit_codes.USAGE
    assert "request_id: 'turn-7' was already used for a different request" in other.stderr


def test_a_latin1_file_is_refused_naming_the_line_or_read_with_its_encoding(env, tmp_path):
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"id": "a", "content_title": "plain"}\n{"id": "b", "content_title": "café"}\n'.encode("latin-1"))
    refused = _ferret(["ingest", str(latin), "-n", "enc"], env)
    assert refused.returncode == exit_codes.PARTLY and "stored 1 memories" in refused.stdout
    assert "line 2: line: is not valid utf-8 (byte 0xe9" in refused.stderr
    read = _ferret(["ingest", str(latin), "-n", "enc2", "--encoding", "latin-1"], env)
    assert read.returncode == exit_codes.OK and "stored 2 memories" in read.stdout
    found = _ferret(["run", "café", "-n", "enc2", "--json"], env)
    assert [r["id"] for r in json.loads(found.stdout)["results"]] == ["b"]


def test_the_worker_speaks_rq_conventions(env, producer, redis_client, sample_namespace):
    first = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    second = producer.enqueue({"query": "SOL trade", "namespace": sample_namespace, "queue": "batch"})
    url = env["FERRET_REDIS__URL"]
    bare = {k: v for k, v in env.items() if k != "FERRET_REDIS__URL"}  # only -u says where Redis is
    one_job = _ferret(["worker", "batch", "-u", url, "--name", "rq-style", "--max-jobs", "1"], bare, timeout=60)
    assert one_job.returncode == 0, one_job.stderr
    assert [producer.result(h) is not None for h in (first, second)] == [True, False]
    assert producer.result(first).worker is not None
    lines = one_job.stderr.splitlines()  # the default level: where it listens, then one line per finished job
    assert "INFO" in lines[0] and "Listening on batch at redis://127.0.0.1:" in lines[0], lines
    assert "worker rq-style" in lines[0]
    assert [line for line in lines[1:] if " INFO " in line] == [
        *[line for line in lines if f"job {first.job_id} on batch (namespace sample): ok in " in line],
        *[line for line in lines if "worker rq-style stopped (--max-jobs 1 reached) after 1 job(s)" in line]], lines
    started = time.monotonic()
    idle = _ferret(["worker", "prefetch", "--max-idle-time", "1"], {**bare, "RQ_REDIS_URL": url}, timeout=60)
    assert idle.returncode == 0 and time.monotonic() - started < 30, idle.stderr
    assert producer.result(second) is None, "a worker of prefetch only left the batch job alone"
    found = _ferret(["result", first.job_id], {**bare, "RQ_REDIS_URL": url})
    assert found.returncode == exit_codes.OK, "RQ_REDIS_URL reached the same Redis"


def test_worker_log_levels(env, producer, sample_namespace):
    handles = [producer.enqueue({"query": q, "namespace": sample_namespace, "queue": "batch"})
               for q in ("BTC thesis", "SOL trade")]
    quiet = _ferret(["worker", "batch", "--max-jobs", "1", "-q"], env, timeout=60)
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr and "DEBUG" not in quiet.stderr, quiet.stderr
    verbose = _ferret(["worker", "batch", "--max-jobs", "1", "-v"], env, timeout=60)
    assert verbose.returncode == 0 and " DEBUG " in verbose.stderr, verbose.stderr
    assert "INFO rq.worker" in verbose.stderr  # RQ's own lines too
    assert all(producer.result(h) is not None for h in handles)
    both = _ferret(["worker", "-v", "-q"], env, timeout=60)
    assert both.returncode == exit_codes.USAGE and both.stderr.startswith("error: --verbose"), both.stderr
