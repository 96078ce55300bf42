"""The shared embedded Redis, as a user with no Redis configured meets it:
every command a subprocess, the server a real redis-server under its keeper."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from ferret.cli import exit_codes
from tests.conftest import SAMPLE, wait_until


def _ferret(args, env, timeout=120):
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _worker(env, *args):
    return subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _socket(env) -> Path:
    return Path(env["FERRET_REDIS__EMBEDDED_DIR"]) / "redis.sock"


def _answers(env) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(_socket(env)), socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_help_starts_nothing(embedded_env):
    run = _ferret(["--help"], embedded_env)
    assert run.returncode == 0 and "redis" in run.stdout
    assert not Path(embedded_env["FERRET_REDIS__EMBEDDED_DIR"]).exists()


def test_the_server_outlives_the_command_that_started_it(embedded_env):
    enqueue = _ferret(["query", "funding squeeze playbook", "--wait", "0", "--json"], embedded_env)
    assert enqueue.returncode == exit_codes.OK, enqueue.stderr
    assert f"started the embedded Redis at unix://{_socket(embedded_env)}" in enqueue.stderr
    job_id = json.loads(enqueue.stdout)["job_id"]
    assert _answers(embedded_env), "the server went away with the command that started it"

    status = _ferret(["redis", "status"], embedded_env)
    assert status.returncode == 0 and f"running at unix://{_socket(embedded_env)}" in status.stdout
    url = _ferret(["redis", "url"], embedded_env).stdout.strip()
    assert url == f"unix://{_socket(embedded_env)}"
    rq_info = subprocess.run([str(Path(sys.executable).parent / "rq"), "info", "-u", url, "-S",
                              "rq.serializers.JSONSerializer", "prefetch"], capture_output=True, text=True, timeout=60)
    assert rq_info.returncode == 0 and "prefetch" in rq_info.stdout and "1 jobs total" in rq_info.stdout, rq_info

    # a later command finds it running: nothing is started, the worker serves the job queued before
    worker = _ferret(["worker", "prefetch", "--burst"], embedded_env)
    assert worker.returncode == 0 and "started the embedded Redis" not in worker.stderr, worker.stderr
    found = _ferret(["result", job_id, "--json"], embedded_env)
    assert found.returncode == exit_codes.OK and json.loads(found.stdout)["status"] == "ok"

    stopped = _ferret(["redis", "stop"], embedded_env)
    assert stopped.returncode == 0 and "stopped the embedded Redis" in stopped.stdout
    assert not _answers(embedded_env)
    assert _ferret(["redis", "status"], embedded_env).returncode == exit_codes.UNAVAILABLE
    assert "not running" in _ferret(["redis", "stop"], embedded_env).stdout

    # its data was saved: the next command starts it again and finds the result
    again = _ferret(["result", job_id, "--json"], embedded_env)
    assert "started the embedded Redis" in again.stderr
    assert again.returncode == exit_codes.OK and json.loads(again.stdout)["status"] == "ok"


def test_commands_starting_at_once_share_one_server(embedded_env):
    runs = [subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "redis", "start"], env=embedded_env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert {out.strip() for out, _ in outputs} == {f"unix://{_socket(embedded_env)}"}
    assert sum("started the embedded Redis" in err for _, err in outputs) == 1, outputs
    # Full lines (-ww: ps cuts them at 80 columns otherwise, which left no directory to find), redis-server
    # processes only (by their command's name: the keeper's arguments name the binary and the directory too).
    listing = subprocess.run(["ps", "-ww", "-eo", "comm=,args="], capture_output=True, text=True).stdout
    servers = [line for line in listing.splitlines()
               if line.split(maxsplit=1)[:1] == ["redis-server"] and str(_socket(embedded_env).parent) in line]
    assert len(servers) <= 1, servers  # redis-server shows its bind address, not its arguments, on some builds


def test_it_stays_while_a_client_is_connected_and_stops_when_idle(embedded_env):
    env = {**embedded_env, "FERRET_REDIS__EMBEDDED_IDLE_SECONDS": "2"}
    worker = _worker(env, "prefetch")
    try:
        assert wait_until(lambda: _answers(env), 30)
        time.sleep(5)  # more than twice the idle time: the worker is a client
        assert _answers(env), "stopped while a worker was connected"
        status = _ferret(["redis", "status"], env)
        connected = re.search(r"(\d+) client\(s\) connected", status.stdout)
        assert connected and int(connected.group(1)) >= 1, status.stdout  # the worker's connections
    finally:
        _stop(worker)
    # watched without connecting (a connection is a use): redis-server removes its socket when it stops
    assert wait_until(lambda: not _socket(env).exists(), 15), "still running long after its last client left"
    assert (_socket(env).parent / "ferret.rdb").exists()


@pytest.mark.timeout(300)  # a 400-line batch across a worker's stop, on a busy 2-core CI machine
def test_a_batch_survives_sigterm_to_the_worker_that_started_the_server(tmp_path, embedded_env):
    assert _ferret(["ingest", str(SAMPLE), "-n", "sample", "--quiet"], embedded_env).returncode == 0
    _ferret(["redis", "stop"], embedded_env)
    first = _worker(embedded_env, "batch")  # this worker starts the server
    assert wait_until(lambda: _answers(embedded_env), 30)
    source, out = tmp_path / "queries.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"query": f"BTC thesis variant {i}", "namespace": "sample",
                                          "queue": "batch", "options": {"cache": False}}) + "\n"
                              for i in range(400)))
    batch = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "batch", str(source), "--out", str(out),
                              "--wait", "120"], env=embedded_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    client = redis.Redis(unix_socket_path=str(_socket(embedded_env)))
    assert wait_until(lambda: next(client.scan_iter("ferret:result:*"), None) is not None, 60)  # jobs are finishing
    _stop(first)
    assert _answers(embedded_env), "the server went away with the worker that started it"
    second = _worker(embedded_env, "batch")
    try:
        stdout, stderr = batch.communicate(timeout=180)
    finally:
        _stop(second)
    failed = [json.loads(line) for line in out.read_text().splitlines() if '"ok"' not in line]
    assert batch.returncode == exit_codes.OK, (stderr[-2000:], [(r.get("status"), r.get("error")) for r in failed])
    assert "Traceback" not in stderr
    assert json.loads(stdout.strip().splitlines()[-1])["by_status"] == {"ok": 400}
