"""The retrieval cache and the coalescing of identical prefetch requests."""

from __future__ import annotations

from rq import Queue

from ferret.records import Memory
from ferret.worker.backends.local import MemoryStore


def _ask(producer, query, namespace, **extra):
    return producer.wait(producer.enqueue({"query": query, "namespace": namespace, **extra}), 20)


def test_repeat_is_served_from_the_cache(producer, sample_namespace, start_workers, redis_client):
    start_workers(1)
    first = _ask(producer, "What's my BTC thesis?", sample_namespace)
    second = _ask(producer, "  what's my btc THESIS ", sample_namespace)
    assert first.stats.cache_hit is False and second.stats.cache_hit is True
    assert [r.id for r in second.results] == [r.id for r in first.results]
    assert second.context == first.context
    names = {s["name"]: s for s in producer.trace(second.job_id)["spans"]}
    assert names["cache"]["attributes"]["hit"] is True and "pipeline" not in names
    cached = list(redis_client.scan_iter(f"ferret:ns:{sample_namespace}:cache:*"))
    assert len(cached) == 1 and 0 < redis_client.ttl(cached[0]) <= 300


def test_a_memory_change_invalidates_without_a_clear(producer, sample_namespace, start_workers, redis_client):
    start_workers(1)
    before = _ask(producer, "volcano ferries", sample_namespace)
    MemoryStore(redis_client, sample_namespace).upsert(
        [Memory(id="new", content_title="volcano ferries", content_body="ferries stop during the eruption")])
    after = _ask(producer, "volcano ferries", sample_namespace)
    assert after.stats.cache_hit is False
    assert "new" in [r.id for r in after.results] and "new" not in [r.id for r in before.results]


def test_cache_never_crosses_namespaces_filters_or_options(producer, sample_namespace, start_workers,
                                                           redis_client):
    MemoryStore(redis_client, "other").upsert([Memory(id="o1", content_title="BTC thesis elsewhere")])
    start_workers(1)
    assert _ask(producer, "BTC thesis", sample_namespace).stats.cache_hit is False
    other = _ask(producer, "BTC thesis", "other")
    assert other.stats.cache_hit is False and [r.id for r in other.results] == ["o1"]
    filtered = _ask(producer, "BTC thesis", sample_namespace, filters={"subtype": "custom:thesis"})
    assert filtered.stats.cache_hit is False
    assert _ask(producer, "BTC thesis", sample_namespace, options={"max_results": 2}).stats.cache_hit is False
    assert _ask(producer, "BTC thesis", sample_namespace).stats.cache_hit is True


def test_identical_prefetch_requests_in_flight_are_one_job(producer, sample_namespace, start_workers,
                                                           redis_client):
    first = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace})
    second = producer.enqueue({"query": "btc thesis?", "namespace": sample_namespace})
    batch = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "queue": "batch"})
    assert second.job_id == first.job_id and second.coalesced
    assert batch.job_id != first.job_id, "only prefetch requests are coalesced"
    assert Queue("prefetch", connection=redis_client).count == 1
    start_workers(1)
    assert producer.wait(second, 20).job_id == first.job_id


def test_a_worker_restarted_with_other_settings_never_serves_the_old_answer(
        producer, sample_namespace, start_workers, redis_client):
    [worker] = start_workers(1)
    first = _ask(producer, "What's my BTC thesis?", sample_namespace)
    assert first.stats.cache_hit is False and len(first.results) > 2
    assert _ask(producer, "What's my BTC thesis?", sample_namespace).stats.cache_hit is True
    worker.terminate()
    worker.wait(timeout=20)
    start_workers(1, extra_env={"FERRET_PIPELINE__MAX_RESULTS": "2", "FERRET_PIPELINE__MIN_RESULTS": "1"})
    after = _ask(producer, "What's my BTC thesis?", sample_namespace)
    assert after.stats.cache_hit is False and len(after.results) == 2
    assert _ask(producer, "What's my BTC thesis?", sample_namespace).stats.cache_hit is True  # its own entry


def test_a_request_can_skip_the_cache(producer, sample_namespace, start_workers, redis_client):
    start_workers(1)
    assert _ask(producer, "SOL trade", sample_namespace).stats.cache_hit is False
    fresh = _ask(producer, "SOL trade", sample_namespace, options={"cache": False})
    assert fresh.status == "ok" and fresh.stats.cache_hit is None and "cache" not in (fresh.stats.stage_ms or {})
    assert _ask(producer, "BTC funding", sample_namespace, options={"cache": False}).stats.cache_hit is None
    assert _ask(producer, "BTC funding", sample_namespace).stats.cache_hit is False  # nothing was written
