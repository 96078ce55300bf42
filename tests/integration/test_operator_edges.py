"""What an operator reads at the edges: a worker says when and why it stops,
and a job RQ ended with no Ferret result says so, with its own exit code,
instead of "no final result yet"."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from rq import Worker

from ferret.cli import exit_codes
from tests.conftest import ROOT


def _worker(env, *args):
    return subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", *args], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_worker_says_why_it_stopped(worker_class, env, producer, sample_namespace, redis_client):
    producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    burst = _worker(env, "--burst", "--worker-class", worker_class)
    _, err = burst.communicate(timeout=60)
    assert burst.returncode == 0
    assert "stopped (--burst: the queues are empty) after 1 job(s)" in err, err
    serving = _worker(env, "--worker-class", worker_class)
    deadline = time.monotonic() + 30
    while Worker.count(connection=redis_client) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    serving.send_signal(signal.SIGTERM)
    _, err = serving.communicate(timeout=60)
    assert "stopped (SIGTERM: the job in hand, if any, finished first) after 0 job(s)" in err, \
        f"exit {serving.returncode}: {err}"


def test_a_job_rq_failed_without_a_ferret_result_says_so(env, producer, sample_namespace):
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    stock = subprocess.run([sys.executable, "-m", "rq.cli", "worker", "--burst", "-u", env["FERRET_REDIS__URL"],
                            "prefetch"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert stock.returncode == 0, stock.stderr  # a stock RQ worker (pickle) took the JSON job and failed it
    shown = subprocess.run([sys.executable, "-m", "ferret.cli.main", "result", handle.job_id], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == exit_codes.ENDED_BY_RQ, shown.stderr
    assert shown.stderr.startswith(f"error: job {handle.job_id} was failed by RQ with no Ferret result (")
    assert "ferret batch --resume" in shown.stderr and "Traceback" not in shown.stderr


def test_redis_stop_with_a_worker_connected_asks_for_force(embedded_env):
    from tests.conftest import wait_until
    from tests.integration.test_embedded_redis import _answers, _ferret

    worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "-q"], env=embedded_env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: _answers(embedded_env), 30)
        assert wait_until(lambda: "worker(s) are connected" in _ferret(["redis", "stop"], embedded_env).stderr, 30)
        refused = _ferret(["redis", "stop"], embedded_env)
        assert refused.returncode == exit_codes.USAGE and "or pass --force" in refused.stderr
        assert _answers(embedded_env)  # still running
        forced = _ferret(["redis", "stop", "--force"], embedded_env)
        assert forced.returncode == 0 and "1 of them worker(s)): saving its data ..." in forced.stderr
        assert "stopped the embedded Redis in" in forced.stdout and not _answers(embedded_env)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_sigterm_while_the_worker_starts_is_a_warm_stop(worker_class, env):
    """The signal comes as soon as the worker says it listens: while RQ registers it, before RQ's
    own signal handlers are in place. It still stops warm and says why."""
    starting = _worker(env, "--worker-class", worker_class, "--log-level", "INFO")
    assert starting.stderr is not None
    seen = []
    for line in starting.stderr:
        seen.append(line)
        if "Listening on" in line:
            starting.send_signal(signal.SIGTERM)
            break
    _, err = starting.communicate(timeout=60)
    err = "".join(seen) + err
    assert starting.returncode == 0, err
    assert "stopped (SIGTERM: the job in hand, if any, finished first) after 0 job(s)" in err, err
    assert "Traceback" not in err
