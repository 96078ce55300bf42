"""The lean bookkeeping is optional: with ``service.lean_bookkeeping: false``
both worker classes run on RQ's own bookkeeping, with the same guarantees."""

from __future__ import annotations

import json
import time

import pytest
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import FinishedJobRegistry
from rq.serializers import JSONSerializer

from ferret.bench.round_trips import measure
from ferret.worker.core.results import REFUSAL_LOG

STOCK = {"FERRET_SERVICE__LEAN_BOOKKEEPING": "false"}
COMPOUND = "What's my BTC thesis and how did my last SOL trade go?"


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_stock_rq_bookkeeping_serves_ferret_jobs(worker_class, producer, sample_namespace, start_workers,
                                                  redis_client):
    start_workers(1, "--worker-class", worker_class, extra_env=STOCK)
    handles = [producer.enqueue({"query": q, "namespace": sample_namespace}) for q in (COMPOUND, "BTC thesis")]
    for handle in handles:
        result = producer.wait(handle, 20)
        assert result is not None and result.status == "ok" and result.results
    assert producer.trace(handles[0])["spans"]
    finished = FinishedJobRegistry("prefetch", connection=redis_client)
    for handle in handles:  # RQ ends its side of the job just after the job wrote Ferret's result
        deadline = time.monotonic() + 10
        while Job.exists(handle.job_id, connection=redis_client) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not Job.exists(handle.job_id, connection=redis_client)  # RQ keeps nothing of a success
        assert not redis_client.exists(f"rq:results:{handle.job_id}")
        assert handle.job_id not in finished.get_job_ids()
    foreign = Queue("prefetch", connection=redis_client, serializer=JSONSerializer).enqueue_call("os.system",
                                                                                                args=("true",))
    deadline = time.monotonic() + 20
    while foreign.get_status(refresh=True) != JobStatus.FAILED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert foreign.get_status(refresh=True) == JobStatus.FAILED and producer.result(foreign.id) is None
    assert json.loads(redis_client.lindex(REFUSAL_LOG, 0))["reason"] == "not_ferret_job"


def test_the_lean_layer_saves_round_trips(redis_server):
    figures = measure(jobs=20)
    assert 0 < figures["lean"] < figures["stock"], figures
