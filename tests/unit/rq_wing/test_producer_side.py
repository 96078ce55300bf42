"""The producer's view of RQ's keys, which anyone who can write to Redis may have overwritten."""

from __future__ import annotations

import time

import fakeredis
from hypothesis import given, settings
from hypothesis import strategies as st
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from ferret.contract import JOB_FUNCTION, QUEUES
from ferret.job_ids import job_id_for
from ferret.redis_plumbing.clock import RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.rq_layer.producer_side import EnqueueCommands, job_live
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


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(queue=st.sampled_from(QUEUES), namespace=st.text(min_size=1, max_size=20),
       extra=st.dictionaries(st.text(max_size=8), _JSON, max_size=4),
       job_id=st.from_regex(r"\A[A-Za-z0-9_-]{1,40}\Z"), timeout=st.integers(1, 10**6),
       failure_ttl=st.integers(1, 10**7), now=st.floats(0, 4e9))
def test_a_jobs_enqueue_commands_from_the_template_are_rqs_own(queue, namespace, extra, job_id, timeout,
                                                                failure_ttl, now):
    """The template fills in each job's parts; the commands equal those RQ's own enqueue makes for the job."""
    commands = EnqueueCommands()
    payload = {**extra, "request": {"query": "what did Caroline research?", "namespace": namespace}}
    # The queue's template made by another job, of another timeout and failure TTL:
    commands(queue, {"request": {"namespace": "another"}}, "earlier-job", timeout + 1, failure_ttl + 2, now + 1)
    assert commands(queue, payload, job_id, timeout, failure_ttl, now) == \
        commands.from_rq(queue, payload, job_id, timeout, failure_ttl, now)


def test_a_templated_enqueue_makes_a_job_rqs_worker_reads_back():
    client = fakeredis.FakeRedis()
    payload = {"request": {"query": "when did Melanie paint a sunrise?", "namespace": "n1"}}
    for command in EnqueueCommands()("batch", payload, "j-1", 30, 600, time.time()):
        client.execute_command(*command)
    job = Job.fetch("j-1", connection=client, serializer=JSONSerializer)
    assert (job.func_name, list(job.args), job.origin, job.timeout, job.failure_ttl) == \
        (JOB_FUNCTION, [payload], "batch", 30, 600)
    assert job.get_status() == "queued" and client.lrange("rq:queue:batch", 0, -1) == [b"j-1"]


def test_producers_share_one_enqueue_template_and_it_still_makes_rqs_own_commands():
    """A producer's start builds no enqueue machinery of its own (RQ's queues and templates are the same for
    every producer of the process); the shared one gives what a fresh one gives."""
    from ferret.producer.client import Producer
    from ferret.settings import load_settings

    settings = load_settings(environ={})
    first, second = Producer(fakeredis.FakeRedis(), settings), Producer(fakeredis.FakeRedis(), settings)
    assert first.queues.commands is second.queues.commands is first.rules.enqueue_commands
    assert first.queues.commands is EnqueueCommands.shared()
    payload = {"request": {"namespace": "n", "query": "q"}}
    now = time.time()
    assert EnqueueCommands.shared()("prefetch", payload, "j-2", 30, 600, now) == \
        EnqueueCommands()("prefetch", payload, "j-2", 30, 600, now)
