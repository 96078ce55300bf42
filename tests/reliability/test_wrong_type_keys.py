"""RQ keys of the wrong Redis type are said once each and set aside, not met
with an ERROR and a traceback at every pass; entries a started registry
keeps for jobs that have finished (``<id>:<execution>`` of a job that ran
elsewhere) are cleaned. Real redis-server, real worker processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ferret import keys
from ferret.rq_layer.key_types import SET_ASIDE_PREFIX
from tests.conftest import ROOT

PLANTED = {"rq:finished:prefetch": "set", "rq:wip:batch": "set", "rq:queue:prefetch:intermediate": "hset"}


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_wrong_type_keys_are_said_once_and_set_aside_and_stale_entries_cleaned(
        worker_class, env, producer, sample_namespace, redis_client, tmp_path):
    waiting = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})  # for the worker to come
    for key, how in PLANTED.items():
        if how == "set":
            redis_client.set(key, "not a sorted set")
        else:
            redis_client.hset(key, "a", "hash")
    log = tmp_path / "worker.log"
    with log.open("w") as sink:
        worker = subprocess.Popen([sys.executable, "-m", "ferret.cli.main", "worker", "--worker-class", worker_class],
                                  env={**env, "FERRET_SERVICE__MAINTENANCE_INTERVAL_SECONDS": "1"}, cwd=ROOT,
                                  stderr=sink, stdout=sink)
        try:
            assert producer.wait(waiting, 30).status == "ok"
            first = producer.enqueue({"query": "SOL trade", "namespace": sample_namespace})
            assert producer.wait(first, 30).status == "ok"
            stale = f"{first.job_id}:0123456789abcdef"  # its execution's entry, left in another queue's registry
            redis_client.zadd("rq:wip:batch", {stale: time.time()})
            time.sleep(5)  # several reaper and maintenance passes
            assert redis_client.zscore("rq:wip:batch", stale) is None
            assert producer.wait(producer.enqueue({"query": "ETH", "namespace": sample_namespace}), 30).status == "ok"
            assert worker.poll() is None
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    text = log.read_text()
    for key in PLANTED:
        assert text.count(f"{key} held a Redis") == 1, text
        assert redis_client.exists(SET_ASIDE_PREFIX + key) and redis_client.ttl(SET_ASIDE_PREFIX + key) > 0
    assert "Traceback" not in text and " ERROR " not in text, text
    assert redis_client.exists(keys.result(first.job_id))
