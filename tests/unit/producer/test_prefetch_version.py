"""A prefetch records the memory version its job runs at: the one read before the enqueue, not a second
read after it, which would stamp a write landing in between as seen (and cost a round trip)."""

from __future__ import annotations

import fakeredis

from ferret import keys
from ferret.producer.client import Producer
from ferret.producer.conversations import _Entry, conversation_key
from ferret.producer.rules import ProducerRules
from ferret.records import Memory
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore


def test_a_write_landing_after_the_enqueue_is_not_stamped_as_seen(monkeypatch):
    client = fakeredis.FakeRedis()
    settings = load_settings(environ={})
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_body="BTC thesis")])
    enqueued_at = int(client.get(keys.memory_version("ns")))
    original = ProducerRules.enqueue_with

    def enqueue_then_a_write_lands(self, *args, **kwargs):
        put = yield from original(self, *args, **kwargs)
        store.upsert([Memory(id="b", content_body="a note written just after the enqueue")])
        return put

    monkeypatch.setattr(ProducerRules, "enqueue_with", enqueue_then_a_write_lands)
    producer = Producer(client, settings)
    handle = producer.prefetch("ns", "chat-1", "BTC thesis")
    assert handle.memory_version == enqueued_at
    assert int(client.get(keys.memory_version("ns"))) > enqueued_at  # the write did land
    raw = client.lrange(conversation_key("ns", "chat-1", settings.limits.max_request_id_chars), 0, -1)
    entries = [_Entry.parse(item) for item in raw]
    assert [(entry.job_id, entry.version) for entry in entries if entry] == [(handle.job_id, enqueued_at)]
