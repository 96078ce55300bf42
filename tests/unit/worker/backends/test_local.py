"""The local backend over fakeredis: the change log, incremental indexes,
snapshots, the memory bound (real Redis and real workers: tests/integration)."""

import time

import fakeredis
import pytest

from ferret import keys
from ferret.records import Filters, Memory
from ferret.settings import LocalSettings
from ferret.worker.backends import snapshots
from ferret.worker.backends.change_log import ChangeLog, Position
from ferret.worker.backends.index_builder import build_snapshot
from ferret.worker.backends.local import LocalBackends, MemoryStore

NONE = Filters()


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def _backends(client, tmp_path, **local):
    return LocalBackends(client, local=LocalSettings(**local), index_root=tmp_path / "idx")


def _filler():
    """Enough memories that a build commits (fewer are staged whole: see the test of that)."""
    return [Memory(id=f"f{i}", content_title=f"filler note {i}") for i in range(LocalSettings().fold_changes)]


def _ids(backend, query="bitcoin"):
    return {h.id for h in backend.search(query, 10, NONE)}


def test_index_follows_writes_and_deletes_by_applying_only_the_changes(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(50)])
    backends = _backends(client, tmp_path)
    first = backends.for_namespace("ns")
    assert first.readiness.how == "built" and len(_ids(first)) == 10
    store.upsert([Memory(id="new", content_title="bitcoin halving zebra")])
    after_write = backends.for_namespace("ns")
    assert after_write.readiness.how == "caught_up" and after_write.readiness.changes == 1
    assert "new" in _ids(after_write, "zebra")
    store.delete(["new"])
    assert _ids(backends.for_namespace("ns"), "zebra") == set()
    assert backends.registry.builds == 1, "writes never rebuild the index"
    assert backends.for_namespace("ns").readiness.how == "warm"


def test_change_log_entries_are_versions_in_order(client):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="x")])
    store.delete(["a", "missing"])
    store.clear()
    version, changes, stored = ChangeLog(client, "ns").after(Position(0))
    assert version == 3 and [(c.version, c.op, c.ids) for c in changes] == [
        (1, "upsert", ("a",)), (2, "delete", ("a", "missing")), (3, "clear", ())]
    assert stored == {"a": None, "missing": None}  # what the store holds now for every id named: nothing


def test_the_memories_a_catch_up_names_come_with_its_changes_in_one_read(client):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="x"), Memory(id="b", content_title="y")])
    log = ChangeLog(client, "ns")
    position = log.position()
    store.upsert([Memory(id="b", content_title="y again")])
    store.delete(["a"])
    client.xadd(keys.changes("ns"), {"v": "9", "op": "upsert", "ids": "not json"})  # not ours: no ids from it
    version, changes, stored = log.after(position)
    assert version == 3 and [c.ids if c is not None else None for c in changes] == [("b",), ("a",), None]
    assert set(stored) == {"a", "b"} and stored["a"] is None
    assert Memory.model_validate_json(stored["b"]).content_title == "y again"
    many = [Memory(id=f"m{n}", content_title="z") for n in range(1001)]  # more than one read's batch
    position = log.position()
    store.upsert(many)
    assert log.after(position)[2] == {}  # too many: the caller reads them in batches


def test_clear_then_write(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin")])
    backends = _backends(client, tmp_path)
    assert _ids(backends.for_namespace("ns")) == {"a"}
    store.clear()
    store.upsert([Memory(id="b", content_title="bitcoin")])
    assert _ids(backends.for_namespace("ns")) == {"b"}


def test_namespaces_are_isolated(client, tmp_path):
    MemoryStore(client, "alice").upsert([Memory(id="a", content_title="secret bitcoin plan")])
    MemoryStore(client, "bob").upsert([Memory(id="b", content_title="bitcoin")])
    hits = _backends(client, tmp_path).for_namespace("bob").search("secret bitcoin plan", 10, NONE)
    assert [h.id for h in hits] == ["b"]


def test_update_replaces_memory(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin")])
    backends = _backends(client, tmp_path)
    backends.for_namespace("ns")
    store.upsert([Memory(id="a", content_title="ethereum")])
    assert store.count() == 1
    assert backends.for_namespace("ns").search("bitcoin", 5, NONE) == []


def test_job_stamped_version_skips_the_redis_check_but_sees_older_writes(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin thesis")])
    backends = _backends(client, tmp_path)
    stamped = store.version()
    backends.for_namespace("ns", at_least=stamped)
    assert backends.for_namespace("ns", at_least=stamped).readiness.how == "warm"
    store.upsert([Memory(id="b", content_title="bitcoin lesson")])
    fresh = backends.for_namespace("ns", at_least=store.version())
    assert fresh.readiness.how == "caught_up" and _ids(fresh) == {"a", "b"}


def test_a_cold_worker_loads_the_snapshot_then_the_changes_since(client, tmp_path):
    store = MemoryStore(client, "big")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(30)])
    manifest = build_snapshot(client, "big", LocalSettings())
    assert manifest.memories == 30 and manifest.position.version == store.version()
    store.upsert([Memory(id="late", content_title="bitcoin zebra")])
    cold = _backends(client, tmp_path, inline_build_max=10)
    backend = cold.for_namespace("big")
    assert backend.readiness.how == "snapshot" and backend.readiness.changes == 1
    assert _ids(backend, "zebra") == {"late"} and cold.registry.builds == 0


def test_a_gap_in_the_change_log_reloads_instead_of_missing_writes(client, tmp_path):
    store = MemoryStore(client, "ns", change_log_length=100)
    store.upsert([Memory(id="a", content_title="bitcoin")])
    backends = _backends(client, tmp_path)
    backends.for_namespace("ns")
    store.upsert([Memory(id="b", content_title="bitcoin")])
    client.delete(keys.changes("ns"))  # the entries this worker needed are gone
    store.upsert([Memory(id="c", content_title="bitcoin")])
    assert _ids(backends.for_namespace("ns")) == {"a", "b", "c"}
    assert backends.registry.builds == 2


def _lose_last_write(client, namespace, memory_id):
    """What a failover does to a write that had not reached the promoted replica."""
    last = client.xrevrange(keys.changes(namespace), count=1)[0][0]
    client.xdel(keys.changes(namespace), last)
    client.decr(keys.memory_version(namespace))
    client.hdel(keys.memories(namespace), memory_id)


@pytest.mark.parametrize("lost_then_written", [0, 1, 2])
def test_a_failover_that_lost_a_write_the_index_applied_reloads_the_index(client, tmp_path, lost_then_written):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin")])
    backends = _backends(client, tmp_path)
    backends.for_namespace("ns")
    store.upsert([Memory(id="lost", content_title="bitcoin")])
    assert _ids(backends.for_namespace("ns")) == {"a", "lost"}  # applied by the index
    _lose_last_write(client, "ns", "lost")
    written = [Memory(id=f"after{i}", content_title="bitcoin") for i in range(lost_then_written)]
    store.upsert(written)  # the new primary's versions reuse the lost one's number
    backend = backends.for_namespace("ns")
    assert _ids(backend) == {"a", *(m.id for m in written)}
    assert {h.id for h in backend.search("bitcoin", 10, NONE)} == {"a", *(m.id for m in written)}
    assert backends.registry.builds == 2, "the index that applied the lost write was loaded afresh"


def test_a_hostile_change_log_entry_is_skipped_not_applied(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin")])
    backends = _backends(client, tmp_path)
    backends.for_namespace("ns")
    client.xadd(keys.changes("ns"), {"v": "x", "op": "rm -rf", "ids": "{"})
    store.upsert([Memory(id="b", content_title="bitcoin")])
    assert _ids(backends.for_namespace("ns")) == {"a", "b"}


def test_the_memory_bound_evicts_the_least_recently_used(client, tmp_path):
    for n in range(6):
        MemoryStore(client, f"t{n}").upsert(
            [Memory(id=f"m{i}", content_title=f"bitcoin {n} note {i} " * 30) for i in range(300)])
    backends = _backends(client, tmp_path, index_memory_mb=64)
    one = backends.registry
    for n in range(6):
        backends.for_namespace(f"t{n}")
    assert set(one.indexes.entries) == {f"t{n}" for n in range(6)} and one.evictions == 0
    assert sum(e.index.writing for e in one.indexes.entries.values()) == 4, "writers beyond four are closed"
    one.settings = one.settings.model_copy(update={"index_memory_mb": 1})  # a bound below two indexes
    backends.for_namespace("t0")
    assert set(one.indexes.entries) == {"t0"} and one.evictions == 5
    assert len(list((tmp_path / "idx").iterdir())) == 1, "evicted indexes leave no files behind"
    assert backends.for_namespace("t3").readiness.how == "built"


def test_the_running_total_and_the_order_of_use_stay_exact(client, tmp_path):
    """The per-job bookkeeping keeps a running total and an order of use instead of walking every
    namespace held: after builds, writes staged and folded, writers closed and an eviction, both
    must equal what walking every entry gives."""
    backends = _backends(client, tmp_path, fold_changes=2)
    registry = backends.registry

    def walked_total():
        return sum(registry.indexes.held(e) for e in registry.indexes.entries.values())

    stores = [MemoryStore(client, f"ns{i}") for i in range(7)]
    for store in stores:
        store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(20)])
        backends.for_namespace(store.namespace)
        assert registry.total_bytes() == walked_total() > 0
    assert sum(e.index.writing for e in registry.indexes.entries.values()) == 4
    for round_ in range(3):  # staged, then folded on the job's path at the second write
        for store in stores[::2]:
            store.upsert([Memory(id=f"w{round_}", content_title="bitcoin zebra")])
            backends.for_namespace(store.namespace)
            assert registry.total_bytes() == walked_total()
    assert set(registry.indexes.staged) == {"ns0", "ns2", "ns4", "ns6"}
    registry.fold_due(everything=True)
    assert registry.indexes.staged == {} and registry.total_bytes() == walked_total()
    used = [e.used for e in registry.indexes.entries.values()]
    assert used == sorted(used), "entries are kept least recently used first"
    backends.for_namespace("ns1")  # used now: the last to go
    assert list(registry.indexes.entries)[-1] == "ns1"
    registry.settings = registry.settings.model_copy(update={"index_memory_mb": 0})
    backends.for_namespace("ns3")
    assert set(registry.indexes.entries) == {"ns3"} and registry.total_bytes() == walked_total()
    assert registry.evictions == 6


def test_a_new_work_horse_finds_its_parents_indexes_on_disk(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin"), *_filler()])
    _backends(client, tmp_path).for_namespace("ns")
    store.upsert([Memory(id="b", content_title="bitcoin")])
    horse = _backends(client, tmp_path)  # same root, new process state
    backend = horse.for_namespace("ns")
    assert backend.readiness.how == "disk" and backend.readiness.changes == 1 and _ids(backend) == {"a", "b"}


def test_a_malformed_snapshot_manifest_is_ignored(client, tmp_path):
    MemoryStore(client, "ns").upsert([Memory(id="a", content_title="bitcoin")])
    client.set(keys.index_snapshot("ns"), '{"generation": "../../etc", "files": [["../x", 1]]}')
    assert snapshots.read_manifest(client, "ns") is None
    assert _backends(client, tmp_path).for_namespace("ns").readiness.how == "built"


def test_an_oversized_or_wrong_type_snapshot_is_not_read_past_its_size(client, tmp_path):
    MemoryStore(client, "ns").upsert([Memory(id=f"m{i}", content_title=f"bitcoin {i}") for i in range(20)])
    manifest = build_snapshot(client, "ns", LocalSettings())
    chunk = keys.index_snapshot_chunk("ns", manifest.generation, 0)
    client.set(chunk, b"\0" * (snapshots.CHUNK_BYTES + 10))  # longer than any chunk of ours
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert not snapshots.load(client, "ns", manifest, tmp_path / "a")
    client.delete(chunk)
    client.rpush(chunk, "a list")
    assert not snapshots.load(client, "ns", manifest, tmp_path / "b")
    assert _backends(client, tmp_path).for_namespace("ns").readiness.how == "built"
    client.set(keys.index_snapshot("ns"), b"[" * (snapshots.MAX_MANIFEST_BYTES + 1))
    assert snapshots.read_manifest(client, "ns") is None
    client.delete(keys.index_snapshot("ns"))
    client.hset(keys.index_snapshot("ns"), "a", "b")
    assert snapshots.read_manifest(client, "ns") is None


def test_filters_are_applied_in_the_index(client, tmp_path):
    MemoryStore(client, "ns").upsert([
        Memory(id="a", content_title="bitcoin", state_lifecycle="ACTIVE"),
        Memory(id="b", content_title="bitcoin", state_lifecycle="ARCHIVED")])
    backend = _backends(client, tmp_path).for_namespace("ns")
    assert [h.id for h in backend.search("bitcoin", 1, Filters(lifecycle="archived"))] == ["b"]


def _saved_version(backends, namespace="ns"):
    import json as _json
    from hashlib import sha256

    directory = backends.index_root / sha256(namespace.encode()).hexdigest()[:24]
    return _json.loads((directory / "ferret-position.json").read_text())["version"]


def test_a_write_is_staged_searchable_and_committed_later(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(20)])
    backends = _backends(client, tmp_path, fold_changes=3)
    backends.for_namespace("ns")
    store.upsert([Memory(id="new", content_title="bitcoin halving zebra")])
    staged = backends.for_namespace("ns")
    assert (staged.readiness.how, staged.readiness.changes, staged.readiness.staged, staged.readiness.folded) == \
           ("caught_up", 1, 1, 0)
    assert "new" in _ids(staged, "zebra") and _saved_version(backends) == 1  # on disk: the last commit only
    store.upsert([Memory(id="two", content_title="zebra two")])
    store.delete(["m0"])
    folded = backends.for_namespace("ns")  # the third staged change reaches fold_changes: committed on the path
    assert (folded.readiness.staged, folded.readiness.folded) == (0, 3) and _saved_version(backends) == 4
    assert _ids(folded, "zebra") == {"new", "two"} and "m0" not in _ids(folded, "note 0")


def test_staged_writes_are_committed_after_a_job_once_old_enough(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin"), *_filler()])
    backends = _backends(client, tmp_path, fold_seconds=0)
    backends.for_namespace("ns")
    store.upsert([Memory(id="b", content_title="bitcoin zebra")])
    assert backends.for_namespace("ns").readiness.staged == 1
    backends.after_job()
    assert _saved_version(backends) == 2 and backends.registry.folds == 1
    assert backends.for_namespace("ns").readiness.how == "warm"


def test_the_look_for_staged_writes_due_stops_at_the_first_namespace_not_due(client, tmp_path):
    """Namespaces wait in the order their oldest staged change came: the oldest are committed once old
    enough, and the look ends at the first that is not, whatever follows it (a job does not pay for every
    namespace with staged writes)."""
    backends = _backends(client, tmp_path, fold_seconds=30)
    for namespace in ("a", "b", "c", "d"):
        store = MemoryStore(client, namespace)
        store.upsert(_filler())
        backends.for_namespace(namespace)
        store.upsert([Memory(id="new", content_title="zebra")])
        assert backends.for_namespace(namespace).readiness.staged == 1
    assert list(backends.registry.indexes.staged) == ["a", "b", "c", "d"]
    entries = backends.registry.indexes.entries
    now = time.monotonic()
    for namespace, age in (("a", 90), ("b", 60), ("c", 10), ("d", 120)):  # d out of order: never so in a worker
        entries[namespace].index.recent.since = now - age
    assert backends.registry.fold_due()[0] == 2 and backends.registry.folds == 2
    assert list(backends.registry.indexes.staged) == ["c", "d"]  # c is not due, so d was not looked at
    entries["c"].index.recent.since = now - 31
    assert backends.registry.fold_due()[0] == 2 and list(backends.registry.indexes.staged) == []


def test_staged_writes_lost_with_a_process_are_staged_again_from_the_log(client, tmp_path):
    """What a crash (or a fork work horse's exit) loses is in Redis: the next process catches up."""
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin"), *_filler()])
    first = _backends(client, tmp_path)
    first.for_namespace("ns")
    store.upsert([Memory(id="b", content_title="bitcoin zebra")])
    assert "b" in _ids(first.for_namespace("ns"), "zebra")
    first.registry.indexes.entries["ns"].index.release_writer()  # gone without a commit
    again = LocalBackends(client, local=LocalSettings(), index_root=first.index_root)
    found = again.for_namespace("ns")
    assert found.readiness.how == "disk" and found.readiness.changes == 1 and "b" in _ids(found, "zebra")


def test_hits_come_from_memories_the_worker_holds_until_a_change_names_them(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(5)])
    backends = _backends(client, tmp_path)
    held = backends.registry.held
    first = backends.for_namespace("ns").search("bitcoin", 10, NONE)
    reads = held.reads
    again = backends.for_namespace("ns").search("bitcoin", 10, NONE)
    assert [h.id for h in again] == [h.id for h in first] and held.reads == reads  # no read from Redis
    store.upsert([Memory(id="m1", content_title="bitcoin note rewritten")])
    store.delete(["m2"])
    after = {h.id: h for h in backends.for_namespace("ns").search("bitcoin", 10, NONE)}
    assert "m2" not in after and "rewritten" in after["m1"].memory.content_title
    store.clear()
    store.upsert([Memory(id="m3", content_title="bitcoin after the clear")])
    assert [h.memory.content_title for h in backends.for_namespace("ns").search("bitcoin", 10, NONE)] == [
        "bitcoin after the clear"]


def test_staged_writes_outlive_writers_closed_to_stay_within_bounds(client, tmp_path):
    backends = _backends(client, tmp_path)
    stores = [MemoryStore(client, f"ns{i}") for i in range(6)]
    for store in stores:
        store.upsert([Memory(id="a", content_title="bitcoin"), *_filler()])
        backends.for_namespace(store.namespace)
    for store in stores:  # six namespaces with staged writes: only four writers stay open
        store.upsert([Memory(id="b", content_title="bitcoin zebra")])
        assert backends.for_namespace(store.namespace).readiness.staged == 1
    for store in stores:
        assert "b" in _ids(backends.for_namespace(store.namespace), "zebra")
    backends.after_job()
    backends.registry.fold_due(everything=True)
    for store in stores:
        assert "b" in _ids(backends.for_namespace(store.namespace), "zebra")


def test_a_namespace_of_few_memories_is_staged_whole_not_committed(client, tmp_path):
    """An agent's first turns: fewer than fold_changes memories are staged at the build (no writer,
    no commit), searched and scored as committed ones; the directory says nothing is committed, so
    another process stages the log from its start; reaching fold_changes commits them all."""
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}") for i in range(3)])
    backends = _backends(client, tmp_path, fold_changes=5)
    built = backends.for_namespace("ns")
    index = backends.registry.indexes.entries["ns"].index
    assert built.readiness.how == "built" and built.readiness.staged == 3 and not index.writing and len(index) == 0
    assert _ids(built) == {"m0", "m1", "m2"} and _saved_version(backends) == 0
    store.upsert([Memory(id="m3", content_title="bitcoin zebra")])
    horse = LocalBackends(client, local=LocalSettings(fold_changes=5), index_root=backends.index_root)
    found = horse.for_namespace("ns")
    assert found.readiness.how == "disk" and found.readiness.changes == 2 and _ids(found) == {"m0", "m1", "m2", "m3"}
    store.upsert([Memory(id="m4", content_title="bitcoin yak")])
    folded = backends.for_namespace("ns")  # 3 staged at the build + 2 changes: fold_changes reached
    assert folded.readiness.folded == 5 and _saved_version(backends) == 3 and len(index) == 5
    assert _ids(folded) == {f"m{i}" for i in range(5)}


def test_a_catch_up_reads_the_log_once_when_it_holds_the_end_and_pages_past_a_full_read(client, tmp_path,
                                                                                      monkeypatch):
    """One write since the index: one read of the log. More writes than a read returns: every one applied."""
    from ferret.worker.backends import change_log

    store = MemoryStore(client, "ns")
    store.upsert(_filler())
    backends = _backends(client, tmp_path)
    backends.for_namespace("ns")
    reads = []
    real_after = change_log.ChangeLog.after
    monkeypatch.setattr(change_log.ChangeLog, "after",
                        lambda self, position, count=7: reads.append(position) or real_after(self, position, count))
    monkeypatch.setattr("ferret.worker.backends.index_catch_up.READ_BATCH", 7)
    store.upsert([Memory(id="one", content_title="bitcoin zebra")])
    assert backends.for_namespace("ns").readiness.changes == 1 and len(reads) == 1
    for i in range(20):  # 20 writes: three full reads of 7 and one more
        store.upsert([Memory(id=f"w{i}", content_title=f"walrus {i}")])
    reads.clear()
    caught_up = backends.for_namespace("ns")
    assert caught_up.readiness.changes == 20 and len(reads) == 3
    assert len({h.id for h in caught_up.search("walrus", 30, NONE)}) == 20
