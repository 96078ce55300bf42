import fakeredis

from ferret import keys
from ferret.key_migration import MARKER, tag_store_keys


def test_old_store_keys_get_their_hash_tag_and_nothing_else_moves():
    client = fakeredis.FakeRedis()
    client.hset("ferret:ns:alice:memories", "m1", "{}")
    client.set("ferret:ns:alice:version", 3)
    client.xadd("ferret:ns:alice:changes", {"v": 3})
    client.set("ferret:ns:alice:index:g1:0", b"chunk", ex=100)
    client.hset(f"ferret:ns:alice:affinity:{'a' * 32}", "m2", 0.5)
    client.set("ferret:ns:alice:request:" + "b" * 32, "job")  # the queue Redis's: stays
    client.set("ferret:ns:alice:cache:" + "c" * 40, "cached")
    assert tag_store_keys(client) == 5
    assert client.hget(keys.memories("alice"), "m1") == b"{}"
    assert int(client.get(keys.memory_version("alice"))) == 3
    assert client.xlen(keys.changes("alice")) == 1
    assert client.ttl(keys.index_snapshot_chunk("alice", "g1", 0)) > 0  # its TTL moves with it
    assert client.exists("ferret:ns:alice:request:" + "b" * 32, "ferret:ns:alice:cache:" + "c" * 40) == 2
    assert not client.exists("ferret:ns:alice:memories")


def test_the_pass_is_made_once_and_never_overwrites_a_tagged_key():
    client = fakeredis.FakeRedis()
    client.hset(keys.memories("bob"), "new", "{}")
    client.hset("ferret:ns:bob:memories", "old", "{}")
    assert tag_store_keys(client) == 0  # the tagged key exists: the old one is left where it is
    assert client.hkeys(keys.memories("bob")) == [b"new"] and client.get(MARKER)
    client.hset("ferret:ns:carol:memories", "m", "{}")
    assert tag_store_keys(client) == 0 and client.exists("ferret:ns:carol:memories")  # marker: not scanned again
