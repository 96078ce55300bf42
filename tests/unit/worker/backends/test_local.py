import fakeredis
import pytest

from ferret.records import Filters, Memory
from worker.backends.local import LocalBackends, MemoryStore


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def test_index_follows_store_version(client):
    store = MemoryStore(client, "ns")
    backends = LocalBackends(client)
    store.upsert([Memory(id="a", content_title="bitcoin thesis")])
    assert [h.id for h in backends.for_namespace("ns").search("bitcoin", 5, Filters())] == ["a"]
    store.upsert([Memory(id="b", content_title="bitcoin lesson")])
    assert {h.id for h in backends.for_namespace("ns").search("bitcoin", 5, Filters())} == {"a", "b"}
    store.delete(["a"])
    assert [h.id for h in backends.for_namespace("ns").search("bitcoin", 5, Filters())] == ["b"]
    assert backends.cache.rebuilds == 3


def test_index_not_rebuilt_without_changes(client):
    MemoryStore(client, "ns").upsert([Memory(id="a", content_title="bitcoin")])
    backends = LocalBackends(client)
    for _ in range(5):
        backends.for_namespace("ns")
    assert backends.cache.rebuilds == 1


def test_namespaces_are_isolated(client):
    MemoryStore(client, "alice").upsert([Memory(id="a", content_title="secret bitcoin plan")])
    MemoryStore(client, "bob").upsert([Memory(id="b", content_title="bitcoin")])
    hits = LocalBackends(client).for_namespace("bob").search("secret bitcoin plan", 10, Filters())
    assert [h.id for h in hits] == ["b"]


def test_update_replaces_memory(client):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin")])
    store.upsert([Memory(id="a", content_title="ethereum")])
    assert store.count() == 1
    assert LocalBackends(client).for_namespace("ns").search("bitcoin", 5, Filters()) == []


def test_job_stamped_version_skips_the_redis_check_but_sees_older_writes(client):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin thesis")])
    backends = LocalBackends(client)
    stamped = store.version()
    backends.for_namespace("ns", at_least=stamped)
    calls = []
    original = MemoryStore.version
    MemoryStore.version = lambda self: calls.append(1) or original(self)  # type: ignore[method-assign]
    try:
        backends.for_namespace("ns", at_least=stamped)
        assert calls == [], "an index at least as new as the stamp needs no round trip"
        store.upsert([Memory(id="b", content_title="bitcoin lesson")])
        fresh = backends.for_namespace("ns", at_least=original(store))
        assert calls == [1] and {h.id for h in fresh.search("bitcoin", 5, Filters())} == {"a", "b"}
    finally:
        MemoryStore.version = original  # type: ignore[method-assign]
