"""A worker cut off from Redis mid-batch, and its return.

One worker reaches Redis through a TCP proxy on loopback, the other
directly. Once a 400-line ``ferret batch`` is under way the proxy is cut
(connections closed, new ones refused) for 30 s, longer than the worker TTL
(16 s). The batch must end with 400 ``ok``, each line once: the cut worker's
job is re-run elsewhere. When the proxy is restored the cut worker must
still be alive, registered again, and serve jobs.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from rq import Worker

from ferret.errors import RedisUnreachable
from ferret.producer.client import Producer
from ferret.redis_plumbing.redis_conn import client_for
from tests.conftest import ROOT
from tests.reliability.tcp_proxy import CuttableProxy

LINES, CUT_SECONDS = 400, 30.0


def _worker(env: dict[str, str], url: str, kind: str, name: str, log) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", kind,
                             "--name", name], env={**env, "FERRET_REDIS__URL": url}, cwd=ROOT,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds:.0f} s: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("kind", ["simple", "fork"])
def test_a_worker_cut_off_for_30_s_loses_no_job_and_comes_back(env, redis_server, redis_client, producer,
                                                               sample_namespace, tmp_path, kind):
    proxy = CuttableProxy(int(redis_server.url.rsplit(":", 1)[1].split("/")[0]))
    names = (f"cut-{kind}", "direct")
    cut_worker = _worker(env, proxy.url, kind, names[0], tmp_path / "cut.log")
    direct = _worker(env, redis_server.url, "simple", names[1], tmp_path / "direct.log")
    batch = None
    try:
        _wait_for(lambda: Worker.count(connection=redis_client) == 2, 30, "both workers registered")
        lines = tmp_path / "in.jsonl"
        lines.write_text("".join(json.dumps({"query": f"SOL funding stop {i}", "namespace": sample_namespace,
                                             "request_id": f"cut-{i}"}) + "\n" for i in range(LINES)))
        out = tmp_path / "out.jsonl"
        batch = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "batch", str(lines), "--out", str(out),
                                  "--wait", "300"], env=env, cwd=ROOT, stdout=(tmp_path / "batch.log").open("wb"),
                                 stderr=subprocess.STDOUT)
        _wait_for(lambda: len(redis_client.keys("ferret:result:*")) >= 20, 60, "the batch under way")
        proxy.cut()
        cut_at = time.monotonic()
        assert batch.wait(timeout=240) == 0, (tmp_path / "batch.log").read_text()[-2000:]
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))
        proxy.restore()
        assert cut_worker.poll() is None, "the cut worker exited: " + (tmp_path / "cut.log").read_text()[-2000:]
        _wait_for(lambda: any(w.name == names[0] for w in Worker.all(connection=redis_client)), 60,
                  "the cut worker registered again")
        direct.terminate()
        direct.wait(timeout=30)
        after = [producer.enqueue({"query": f"BTC thesis {i}", "namespace": sample_namespace, "queue": "batch",
                                   "request_id": f"after-{i}"}) for i in range(10)]
        served = [producer.wait(handle, 60) for handle in after]
    finally:
        for proc in (batch, cut_worker, direct):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        proxy.close()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == LINES and len({row["request_id"] for row in rows}) == LINES
    assert Counter(row["status"] for row in rows) == Counter(ok=LINES)
    assert all(result.status == "ok" for result in served), "the returned worker serves again"


def test_a_producer_cut_off_while_waiting_says_so_then_recovers(redis_server, redis_client, settings,
                                                                 sample_namespace, start_workers, caplog):
    proxy = CuttableProxy(int(redis_server.url.rsplit(":", 1)[1].split("/")[0]))
    try:
        producer = Producer(client_for(proxy.url), settings)
        handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
        proxy.cut()
        start_workers(1)  # answers the job while the producer cannot see it
        threading.Timer(15.0, proxy.restore).start()  # longer than the client's own retries (~10 s)
        with caplog.at_level(logging.WARNING, logger="ferret.producer.client"):
            assert producer.wait(handle, 60).status == "ok"
        said = caplog.text
        assert "out of reach while waiting" in said and "answers again" in said
        proxy.cut()  # and for good: the wait ends saying so, not with a raw connection error
        with pytest.raises(RedisUnreachable, match="out of reach"):
            producer.wait("fr-" + "0" * 32, 12)
    finally:
        proxy.close()
