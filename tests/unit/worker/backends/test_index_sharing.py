"""Indexes taken from another worker on the host by hard links instead of built (``index_sharing``)."""

import os
import shutil
import subprocess
import sys

import fakeredis
import pytest

from ferret import keys
from ferret.records import Filters, Memory
from ferret.settings import LocalSettings
from ferret.worker.backends import index_sharing
from ferret.worker.backends.index_entry import STATE_FILE, directory_name, read_state
from ferret.worker.backends.index_sharing import STORE_FILE
from ferret.worker.backends.local import LocalBackends, MemoryStore

NONE = Filters()


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def _root(base, pid=None, suffix="aaaa"):
    """A worker root named as ``default_index_root`` names them: ``ferret-index-<host>-<pid>-<suffix>``."""
    return base / f"ferret-index-testhost-{os.getpid() if pid is None else pid}-{suffix}"


def _worker(client, root):
    return LocalBackends(client, local=LocalSettings(), index_root=root)


def _memories(count=60, word="bitcoin"):
    return [Memory(id=f"m{i}", content_title=f"{word} note {i}", content_body=f"body {i} of the {word} story")
            for i in range(count)]


def _hits(backend, query="bitcoin"):
    return [(h.id, round(h.score, 6)) for h in backend.search(query, 10, NONE)]


def test_a_second_worker_takes_the_first_ones_committed_index_and_answers_the_same(client, tmp_path):
    MemoryStore(client, "ns").upsert(_memories())
    first, second = _worker(client, _root(tmp_path, suffix="a")), _worker(client, _root(tmp_path, suffix="b"))
    built = first.for_namespace("ns")
    assert built.readiness.how == "built"
    taken = second.for_namespace("ns")
    assert taken.readiness.how == "shared" and second.registry.builds == 0
    assert _hits(taken) == _hits(built) and len(_hits(taken)) == 10
    # a control that builds its own (no peer of its name shape): the same answers again
    alone = _worker(client, tmp_path / "elsewhere" / "idx")
    assert alone.for_namespace("ns").readiness.how == "built" and _hits(alone.for_namespace("ns")) == _hits(built)
    # the copy is hard links: the same files, no bytes copied
    mine, theirs = (root / directory_name("ns") for root in (second.index_root, first.index_root))
    shared = [name for name in os.listdir(mine) if name.endswith(".idx")]
    assert shared and all(os.path.samefile(mine / name, theirs / name) for name in shared)


def test_the_taker_catches_up_with_writes_after_the_peers_commit_and_outlives_the_peers_copy(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert(_memories())
    first, second = _worker(client, _root(tmp_path, suffix="a")), _worker(client, _root(tmp_path, suffix="b"))
    first.for_namespace("ns")
    store.upsert([Memory(id="late", content_title="zebra crossing")])
    store.delete(["m1"])
    taken = second.for_namespace("ns")
    assert taken.readiness.how == "shared" and taken.readiness.changes == 2
    assert [h for h, _ in _hits(taken, "zebra")] == ["late"]
    assert "m1" not in {h for h, _ in _hits(taken, "note 1 story")}
    shutil.rmtree(first.index_root / directory_name("ns"))  # the peer evicts its copy: ours stays whole
    assert [h for h, _ in _hits(second.for_namespace("ns"), "zebra")] == ["late"]


def test_a_state_older_than_the_files_only_applies_changes_again_harmlessly(client, tmp_path):
    """The race the order of reads allows: the peer committed again after its state was read."""
    store = MemoryStore(client, "ns")
    store.upsert(_memories())
    first = _worker(client, _root(tmp_path, suffix="a"))
    first.for_namespace("ns")
    directory = first.index_root / directory_name("ns")
    old_state = (directory / STATE_FILE).read_text()
    store.upsert([Memory(id="m2", content_title="bitcoin note 2 rewritten zebra")])
    store.upsert([Memory(id="extra", content_title="bitcoin extra")])
    first.for_namespace("ns")
    first.registry.fold_due(everything=True)  # committed: the files hold both writes
    assert read_state(directory)[1].version == 3
    (directory / STATE_FILE).write_text(old_state)  # ...but the state read says the first commit
    taken = _worker(client, _root(tmp_path, suffix="b")).for_namespace("ns")
    assert taken.readiness.how == "shared" and taken.readiness.changes == 2
    hits = [h for h, _ in _hits(taken, "bitcoin zebra note rewritten extra")]
    assert len(hits) == len(set(hits)) and hits[0] == "m2" and "extra" in hits  # each once, the new text


def test_peers_of_another_store_dead_workers_and_unusable_copies_are_not_taken(client, tmp_path):
    MemoryStore(client, "ns").upsert(_memories())
    first = _worker(client, _root(tmp_path, suffix="a"))
    first.for_namespace("ns")
    # another store: the same namespace name, other memories
    (first.index_root / STORE_FILE).write_text("local:another-store")
    other = _worker(client, _root(tmp_path, suffix="b"))
    assert other.for_namespace("ns").readiness.how == "built"
    (first.index_root / STORE_FILE).write_text(client.get(keys.store_identity()).decode())
    shutil.rmtree(other.index_root)  # (it built a copy of its own, which would be taken next)
    # a dead worker's root (a process id no process has)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_root = _root(tmp_path, pid=int(dead.stdout), suffix="c")
    shutil.copytree(first.index_root, dead_root)
    shutil.rmtree(first.index_root)
    fourth = _worker(client, _root(tmp_path, suffix="d"))
    assert fourth.for_namespace("ns").readiness.how == "built"
    shutil.rmtree(fourth.index_root)
    # a live peer's copy missing a segment file: the attempt ends clean and the worker builds
    shutil.copytree(dead_root, first.index_root)
    segment = next(name for name in os.listdir(first.index_root / directory_name("ns")) if name.endswith(".idx"))
    os.unlink(first.index_root / directory_name("ns") / segment)
    broken = _worker(client, _root(tmp_path, suffix="e"))
    ready = broken.for_namespace("ns")
    assert ready.readiness.how == "built" and broken.registry.cold_start.peers.failed == 1
    assert len(_hits(ready)) == 10


def test_a_namespace_staged_whole_is_built_not_looked_for(client, tmp_path):
    MemoryStore(client, "ns").upsert(_memories(count=LocalSettings().fold_changes - 1))
    first, second = _worker(client, _root(tmp_path, suffix="a")), _worker(client, _root(tmp_path, suffix="b"))
    assert first.for_namespace("ns").readiness.how == "built"
    assert second.for_namespace("ns").readiness.how == "built"
    assert second.registry.cold_start.peers.failed == 0


def test_a_gap_after_taking_a_copy_builds_instead_of_taking_it_again(client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert(_memories())
    first = _worker(client, _root(tmp_path, suffix="a"))
    first.for_namespace("ns")
    store.upsert([Memory(id="late0", content_title="zebra 0")])
    client.delete(keys.changes("ns"))  # the entries a copy at the peer's commit needs are gone
    for i in range(1, 5):
        store.upsert([Memory(id=f"late{i}", content_title=f"zebra {i}")])
    taken = _worker(client, _root(tmp_path, suffix="b")).for_namespace("ns")
    assert taken.readiness.how == "built"
    assert len(_hits(taken, "zebra")) == 5


def test_after_taking_the_workers_writes_are_committed_once_a_round_without_touching_the_others_files(
        client, tmp_path):
    store = MemoryStore(client, "ns")
    store.upsert(_memories())
    first, second = _worker(client, _root(tmp_path, suffix="a")), _worker(client, _root(tmp_path, suffix="b"))
    first.for_namespace("ns")
    assert second.for_namespace("ns").readiness.how == "shared"
    for round_ in range(3):  # writes caught up by both, in turn; folded by each (the second takes the first's)
        store.upsert([Memory(id=f"w{round_}", content_title=f"zebra {round_} bitcoin")])
        store.delete([f"m{round_}"])
        for worker in (first, second) if round_ % 2 else (second, first):
            worker.for_namespace("ns")
            worker.registry.fold_due(everything=True)
    for query in ("zebra", "bitcoin note", "story"):
        assert _hits(first.for_namespace("ns"), query) == _hits(second.for_namespace("ns"), query)
    assert {h for h, _ in _hits(second.for_namespace("ns"), "zebra")} == {"w0", "w1", "w2"}
    assert first.registry.builds == 1 and second.registry.builds == 0
    # each round, the worker that folds first commits and the other takes its commit (``shared_folds``)
    assert first.registry.folds + second.registry.folds == 3
    assert first.registry.cold_start.peers.folds_taken + second.registry.cold_start.peers.folds_taken == 3


def test_another_users_directories_are_never_taken(client, tmp_path, monkeypatch):
    """The base (/dev/shm by default) is every user's to write in: a copy planted by another user, store
    identity and all, is not taken. Here the peer's files are this user's and the taker runs as another."""
    MemoryStore(client, "ns").upsert(_memories())
    _worker(client, _root(tmp_path, suffix="a")).for_namespace("ns")
    taker = _worker(client, _root(tmp_path, suffix="b"))
    me = os.getuid()
    monkeypatch.setattr(index_sharing.os, "getuid", lambda: me + 1)
    assert taker.for_namespace("ns").readiness.how == "built"
    monkeypatch.undo()
    assert _worker(client, _root(tmp_path, suffix="c")).for_namespace("ns").readiness.how == "shared"
