"""A Nous server holds one tenant's memories: each namespace reads its own
server, and a namespace with none is refused, never served another's."""

from __future__ import annotations

import json

import pytest

from ferret.errors import InvalidRequest
from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.fakes.nous_server import FakeNous, nous_env


@pytest.fixture
def tenant_b():
    fake = FakeNous([Memory(id="b1", content_title="tenant b volcano ferries note")])
    yield fake
    fake.close()


def test_each_namespace_reads_its_own_nous_server(sample_nous, tenant_b, env, redis_client, start_workers):
    mapping = {**nous_env(sample_nous), "FERRET_BACKEND__NOUS__NAMESPACES": json.dumps({"b": tenant_b.base_url})}
    start_workers(1, extra_env=mapping)
    producer = Producer(redis_client, load_settings(environ={**env, **mapping}))
    default = producer.wait(producer.enqueue({"query": "BTC thesis"}), 20)
    other = producer.wait(producer.enqueue({"query": "BTC thesis volcano", "namespace": "b"}), 20)
    assert default.status == "ok" and default.results and all(r.id != "b1" for r in default.results)
    assert other.status == "ok" and [r.id for r in other.results] == ["b1"]


def test_a_namespace_no_server_serves_is_refused(sample_nous, env, redis_client, start_workers):
    start_workers(1, extra_env=nous_env(sample_nous))
    producer = Producer(redis_client, load_settings(environ={**env, **nous_env(sample_nous)}))
    with pytest.raises(InvalidRequest) as refused:
        producer.enqueue({"query": "BTC thesis", "namespace": "c"})
    assert refused.value.field == "namespace"
    local_producer = Producer(redis_client, load_settings(environ=env))  # a producer configured otherwise
    result = local_producer.wait(local_producer.enqueue({"query": "BTC thesis", "namespace": "c"}), 20)
    assert result.status == "failed" and "no Nous server for namespace 'c'" in (result.error or "")
    assert result.results == []
