"""RQ's own stamps (enqueue times, registry scores) on the process's clock."""

from __future__ import annotations

import time

import fakeredis
import pytest
import rq.utils
from rq import Queue
from rq.registry import FinishedJobRegistry
from rq.serializers import JSONSerializer

from ferret.clock import HostClock
from rq_wing.clock import rq_now, use_clock


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
