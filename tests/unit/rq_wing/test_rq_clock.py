"""RQ's own stamps (enqueue times, registry scores) on the process's clock."""

from __future__ import annotations

import datetime
import time

import fakeredis
import pytest
import rq.utils
from rq import Queue
from rq.registry import FinishedJobRegistry
from rq.serializers import JSONSerializer

from ferret.redis_plumbing.clock import HostClock
from ferret.rq_layer.clock import rq_now, use_clock


class Ahead:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def time(self) -> float:
        return time.time() + self.seconds


@pytest.fixture
def an_hour_ahead():
    use_clock(Ahead(3600.0))
    yield
    use_clock(HostClock())


def test_rq_stamps_jobs_and_registry_scores_with_the_given_clock(an_hour_ahead):
    client = fakeredis.FakeRedis()
    queue = Queue("prefetch", connection=client, serializer=JSONSerializer)
    job = queue.enqueue_call("ferret.job", args=({},), job_id="j1")
    assert job.enqueued_at.timestamp() == pytest.approx(time.time() + 3600, abs=5)
    assert rq_now().timestamp() == pytest.approx(time.time() + 3600, abs=5)
    assert rq.utils.current_timestamp() == pytest.approx(time.time() + 3600, abs=5)
    registry = FinishedJobRegistry(queue=queue)
    registry.add(job, ttl=60)
    score = client.zscore(registry.key, "j1")
    assert score == pytest.approx(time.time() + 3600 + 60, abs=5)


def test_a_second_clock_replaces_the_first(an_hour_ahead):
    use_clock(Ahead(-3600.0))
    assert rq_now().timestamp() == pytest.approx(time.time() - 3600, abs=5)


def _rq_nows() -> dict[str, object]:
    import sys

    return {name: module.now for name, module in sys.modules.items()
            if (name == "rq" or name.startswith("rq.")) and hasattr(module, "now")}


def test_building_a_producer_or_a_client_leaves_rqs_clock_to_the_process():
    from ferret.producer.api import Client
    from ferret.producer.client import Producer
    from ferret.settings import load_settings

    before = _rq_nows()
    client = fakeredis.FakeRedis()
    producer = Producer(client, load_settings(environ={}))
    Client(load_settings(environ={}), client)
    assert _rq_nows() == before and rq.utils.now is before["rq.utils"]
    assert producer.queues is not None


def test_a_producers_job_carries_its_clocks_stamps_not_rqs():
    from ferret.rq_layer.producer_side import EnqueueCommands

    an_hour_ahead = time.time() + 3600
    commands = EnqueueCommands()("prefetch", {"request": {"namespace": "n"}}, "j1", 10, 60, now=an_hour_ahead)
    job_hash = next(c for c in commands if c[0] == "HSET" and "created_at" in c)
    fields = dict(zip(job_hash[2::2], job_hash[3::2], strict=True))
    for stamp in ("created_at", "enqueued_at"):
        stamped = rq.utils.utcparse(fields[stamp]).replace(tzinfo=datetime.UTC).timestamp()
        assert stamped == pytest.approx(an_hour_ahead, abs=0.001)
    assert rq.utils.now().timestamp() == pytest.approx(time.time(), abs=5)
