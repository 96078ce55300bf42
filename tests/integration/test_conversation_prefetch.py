"""Conversation-level prefetch against a real redis-server and real workers of
both classes: a newer prefetch supersedes older ones still queued (they end
``expired`` with ``stats.superseded_by``, never run, one final status each),
one already started finishes, and ``context_for`` returns the freshest
finished context, its age and whether memories were written since."""

from __future__ import annotations

import time

import pytest

from ferret import keys
from ferret.errors import InvalidRequest
from ferret.records import Memory
from ferret.worker.backends.local import MemoryStore
from ferret.worker.fakes.chat_server import FakeChat
from tests.conftest import free_port
from tests.integration.test_metrics import wait_for_metrics


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_newer_prefetch_supersedes_the_queued_ones(worker_class, producer, sample_namespace, start_workers,
                                                     redis_client):
    first = producer.prefetch(sample_namespace, "chat-1", "BTC thesis")
    second = producer.prefetch(sample_namespace, "chat-1", "SOL trade")
    other = producer.prefetch(sample_namespace, "chat-2", "ETH funding")  # another conversation: untouched
    third = producer.prefetch(sample_namespace, "chat-1", "funding squeeze playbook")
    for old, newer in ((first, second), (second, third)):
        done = producer.wait(old, 1)  # final at once, with no worker running
        assert done.status == "expired" and done.stats.superseded_by == newer.job_id
        assert "superseded by a newer prefetch" in done.error and not done.results
    assert producer.context_for(sample_namespace, "chat-1") is None  # nothing finished yet
    description = redis_client.hget(f"rq:job:{other.job_id}", "description")  # what dashboards show
    assert description == f"ferret retrieval (prefetch, namespace {sample_namespace})".encode()  # no query text
    port = free_port()
    start_workers(1, "--worker-class", worker_class, "--metrics-port", str(port))
    assert producer.wait(third, 30).status == "ok" and producer.wait(other, 30).status == "ok"
    assert int(redis_client.get(keys.superseded_count())) == 2
    assert wait_for_metrics(port)[("ferret_superseded_total", ())] == 2
    time.sleep(0.3)
    found = producer.context_for(sample_namespace, "chat-1")
    assert found.result.job_id == third.job_id and found.context and not found.stale and not found.newer_pending
    assert 0.2 <= found.age_seconds < 30
    MemoryStore(redis_client, sample_namespace).upsert([Memory(id="new", content_body="a later note")])
    assert producer.context_for(sample_namespace, "chat-1").stale  # memories written since it was enqueued
    assert producer.context_for(sample_namespace, "chat-2").result.job_id == other.job_id
    for superseded in (first, second):  # never ran: RQ has no job, no worker wrote a trace
        assert not redis_client.exists(f"rq:job:{superseded.job_id}")
        assert producer.result(superseded).worker is None


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_a_started_prefetch_finishes_and_the_newer_one_still_runs(worker_class, producer, sample_namespace,
                                                                 start_workers, request):
    chat = FakeChat(favourite={"btc"})
    request.addfinalizer(chat.close)
    chat.mode, chat.delay = "slow", 1.5  # the first job's re-rank keeps it running a while
    start_workers(1, "--worker-class", worker_class,
                  extra_env={"FERRET_RERANK__ENABLED": "true", "FERRET_RERANK__BASE_URL": chat.base_url,
                             "FERRET_RERANK__TIMEOUT_SECONDS": "5"})
    slow = producer.prefetch(sample_namespace, "chat-9", "BTC", options={"rerank": True, "cache": False},
                             deadline_seconds=20)
    deadline = time.monotonic() + 20
    while not chat.requests:  # the worker is in the job's re-rank call
        assert time.monotonic() < deadline
        time.sleep(0.01)
    chat.mode = "ok"
    newer = producer.prefetch(sample_namespace, "chat-9", "SOL trade", deadline_seconds=20)
    running = producer.context_for(sample_namespace, "chat-9")
    assert running is None  # the started one has no result yet
    finished = producer.wait(slow, 30)
    assert finished.status == "ok" and finished.stats.superseded_by is None and finished.results
    assert producer.wait(newer, 30).status == "ok"
    assert producer.context_for(sample_namespace, "chat-9").result.job_id == newer.job_id


def test_a_conversation_id_is_checked(producer, sample_namespace):
    with pytest.raises(InvalidRequest, match="conversation"):
        producer.prefetch(sample_namespace, "", "BTC")
    with pytest.raises(InvalidRequest, match="conversation"):
        producer.context_for(sample_namespace, "x" * 1000)
