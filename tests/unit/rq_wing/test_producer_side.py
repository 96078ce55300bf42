"""The producer's view of RQ's keys, which anyone who can write to Redis may have overwritten."""

from __future__ import annotations

import time

import fakeredis
from rq import Queue
from rq.serializers import JSONSerializer

from ferret.contract import JOB_FUNCTION
from ferret.job_ids import job_id_for
from ferret.redis_plumbing.clock import RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.rq_layer.producer_side import job_live
from ferret.steps_sync import SyncSteps


def test_a_queued_job_is_live_on_its_queue_and_a_wrong_type_list_is_one_it_is_not_on():
    client = fakeredis.FakeRedis()
    steps = SyncSteps(client, client, RedisClock(client), ReplicaWait(client, 0, 0))
    queue = Queue("prefetch", connection=client, serializer=JSONSerializer)
    job = queue.enqueue_call(JOB_FUNCTION, args=({"request": {"query": "BTC"}, "enqueued_at": time.time()},),
                             job_id=job_id_for("default", None))
    client.hset(queue.intermediate_queue_key, "a", "hash")  # planted where RQ keeps a list
    assert steps.run(job_live(job.id)) is True
    client.lrem(queue.key, 1, job.id)  # taken off the queue with no worker starting it
    assert steps.run(job_live(job.id)) is False
