"""A fold another worker on the host has made, taken instead of made again (``shared_folds``)."""

import os

import fakeredis
import pytest

from ferret import keys
from ferret.errors import BackendUnavailable
from ferret.records import Filters, Memory
from ferret.settings import LocalSettings
from ferret.worker.backends import shared_folds
from ferret.worker.backends.index_catch_up import Gap
from ferret.worker.backends.index_entry import STATE_FILE, directory_name, read_state
from ferret.worker.backends.local import LocalBackends, MemoryStore

NONE = Filters()
FOLD = LocalSettings().fold_changes


@pytest.fixture
def client():
    return fakeredis.FakeRedis()


def _root(base, suffix):
    """A worker root named as ``default_index_root`` names them (this process's pid: a live worker)."""
    return base / f"ferret-index-testhost-{os.getpid()}-{suffix}"


def _worker(client, root):
    return LocalBackends(client, local=LocalSettings(), index_root=root)


def _hits(backend, query):
    return [(h.id, round(h.score, 6)) for h in backend.search(query, 10, NONE)]


def _loaded(client, count=100):
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}", content_body=f"body {i} of the story")
                  for i in range(count)])  # more than fold_changes: committed when built, not staged whole
    return store


def _write(store, first, count, word="zebra"):
    """``count`` writes, one change-log entry each."""
    for i in range(first, first + count):
        store.upsert([Memory(id=f"w{i}", content_title=f"{word} {i} bitcoin", content_body=f"written {i}")])


def _peer_folded(client, tmp_path):
    """Two warm workers of one host, and ``FOLD`` writes the first has just committed and the second not
    read yet: the store and the two."""
    store = _loaded(client)
    first, second = _worker(client, _root(tmp_path, "a")), _worker(client, _root(tmp_path, "b"))
    first.for_namespace("ns")
    second.for_namespace("ns")
    _write(store, 0, FOLD)
    first.for_namespace("ns")
    return store, first, second


QUERIES = ("zebra bitcoin", "bitcoin note story", "written", "giraffe")


def test_the_second_worker_takes_the_first_ones_fold_and_answers_as_its_own_fold_would(client, tmp_path):
    store = _loaded(client)
    first, second = _worker(client, _root(tmp_path, "a")), _worker(client, _root(tmp_path, "b"))
    control = _worker(client, tmp_path / "alone" / "idx")  # no peers (its root is not named as workers' are)
    for worker in (first, second, control):
        worker.for_namespace("ns")
    _write(store, 0, FOLD)
    assert first.for_namespace("ns").readiness.folded == FOLD and first.registry.folds == 1
    taken = second.for_namespace("ns")
    assert taken.readiness.folded == FOLD and taken.readiness.staged == 0 and taken.readiness.fold_taken
    assert not first.for_namespace("ns").readiness.fold_taken
    assert second.registry.folds == 0 and second.registry.cold_start.peers.folds_taken == 1
    assert control.for_namespace("ns").readiness.folded == FOLD and control.registry.folds == 1
    for query in QUERIES:
        assert _hits(taken, query) == _hits(control.for_namespace("ns"), query) == _hits(first.for_namespace("ns"),
                                                                                          query)
    assert len(_hits(taken, "zebra")) == 10
    # the fold is the peer's files, linked: no bytes written, and the state says the peer's position
    mine, theirs = (w.index_root / directory_name("ns") for w in (second, first))
    segments = [name for name in os.listdir(mine) if name.endswith(".idx")]
    assert segments and all(os.path.samefile(mine / name, theirs / name) for name in segments)
    assert read_state(mine) == read_state(theirs)
    assert not [p for p in second.index_root.iterdir() if p.name.startswith(".")]  # nothing left beside it


def test_writes_after_the_peers_fold_are_staged_again_and_each_worker_goes_on_on_its_own(client, tmp_path):
    store, first, second = _peer_folded(client, tmp_path)  # the first has folded 32 writes
    _write(store, FOLD, 3)
    store.upsert([Memory(id="w1", content_title="giraffe rewritten")])  # a rewrite of a folded one
    store.delete(["m2"])
    taken = second.for_namespace("ns")  # 37 staged: takes the fold of 32 and stages the 5 after it again
    assert second.registry.cold_start.peers.folds_taken == 1 and second.registry.folds == 0
    assert taken.readiness.staged == 5
    # the peer, caught up the same way, stands where this worker stands: the same answers, scores and all
    assert first.for_namespace("ns").readiness.staged == 5
    for query in QUERIES:
        assert _hits(taken, query) == _hits(first.for_namespace("ns"), query)
    assert [h for h, _ in _hits(taken, "giraffe")] == ["w1"] and "m2" not in {h for h, _ in _hits(taken, "note")}
    assert {h for h, _ in _hits(taken, "zebra")} >= {"w32", "w33", "w34"}
    # from here each commits on its own, in its own directory; the peer's files are not touched
    _write(store, 100, FOLD)
    peer_files = sorted(os.listdir(first.index_root / directory_name("ns")))
    assert second.for_namespace("ns").readiness.folded and second.registry.folds == 1  # the peer has no newer one
    assert sorted(os.listdir(first.index_root / directory_name("ns"))) == peer_files
    assert first.for_namespace("ns").readiness.folded and first.registry.cold_start.peers.folds_taken == 1
    for query in QUERIES:
        assert _hits(first.for_namespace("ns"), query) == _hits(second.for_namespace("ns"), query)


def test_a_peers_fold_that_leaves_most_writes_to_stage_again_is_not_taken(client, tmp_path):
    store, _first, second = _peer_folded(client, tmp_path)
    _write(store, FOLD, FOLD // 2 + 1)  # more than half of a fold after the peer's
    assert second.for_namespace("ns").readiness.folded == FOLD + FOLD // 2 + 1
    assert second.registry.folds == 1 and second.registry.cold_start.peers.folds_taken == 0


def test_a_peers_commit_past_what_this_worker_has_read_is_not_taken(client, tmp_path):
    """A fold after the job (``fold_due``) runs at the position the worker last read, and the peer's
    commit may be past it: the changes between would reach the index but not the memories the worker holds
    for hits (or its vectors), so it folds its own."""
    store = _loaded(client)
    first, second = _worker(client, _root(tmp_path, "a")), _worker(client, _root(tmp_path, "b"))
    first.for_namespace("ns")
    second.for_namespace("ns")
    _write(store, 0, FOLD // 2)
    store.upsert([Memory(id="kept", content_title="okapi sighting", content_body="first text")])
    held = second.for_namespace("ns").search("okapi", 5, NONE)  # read, and now held by the worker
    assert [h.memory.content_body for h in held] == ["first text"]
    store.upsert([Memory(id="kept", content_title="okapi sighting", content_body="second text")])
    _write(store, 50, FOLD)
    first.for_namespace("ns")  # the peer folds past what the second worker has read
    assert second.registry.fold_due(everything=True)[0] == FOLD // 2 + 1
    assert second.registry.cold_start.peers.folds_taken == 0 and second.registry.folds == 1
    backend = second.for_namespace("ns")
    assert [h.memory.content_body for h in backend.search("okapi", 5, NONE)] == ["second text"]
    assert {h for h, _ in _hits(backend, "zebra")} == {h for h, _ in _hits(first.for_namespace("ns"), "zebra")}


def test_a_copy_the_peer_changes_while_it_is_linked_is_given_up_and_the_worker_folds_itself(client, tmp_path,
                                                                                              monkeypatch):
    _store, _first, second = _peer_folded(client, tmp_path)

    def removed_meanwhile(source, directory):
        raise FileNotFoundError(2, "No such file or directory", str(source / "gone.idx"))

    monkeypatch.setattr(shared_folds, "link_files", removed_meanwhile)
    backend = second.for_namespace("ns")
    assert backend.readiness.folded == FOLD and second.registry.folds == 1
    assert second.registry.cold_start.peers.folds_taken == 0 and second.registry.cold_start.peers.failed == 1
    assert len(_hits(backend, "zebra")) == 10
    assert not [p for p in second.index_root.iterdir() if p.name.startswith(".")]


def test_a_copy_that_does_not_open_is_put_back_out_of_the_way_and_the_worker_folds_into_its_own(
        client, tmp_path, monkeypatch):
    _store, first, second = _peer_folded(client, tmp_path)
    directory = second.index_root / directory_name("ns")
    own = sorted(os.listdir(directory))
    real = shared_folds.MemoryIndex

    def corrupt(path):
        assert sorted(os.listdir(path)) != own  # the peer's files, in place
        raise ValueError("Data corrupted: a checksum does not match")

    monkeypatch.setattr(shared_folds, "MemoryIndex", corrupt)
    backend = second.for_namespace("ns")
    monkeypatch.setattr(shared_folds, "MemoryIndex", real)
    assert backend.readiness.folded == FOLD and second.registry.folds == 1
    assert second.registry.cold_start.peers.failed == 1 and second.registry.cold_start.peers.folds_taken == 0
    assert set(own) <= set(os.listdir(directory))  # its own files back, its commit added to them
    assert not [p for p in second.index_root.iterdir() if p.name.startswith(".")]
    for query in QUERIES:
        assert _hits(backend, query) == _hits(first.for_namespace("ns"), query)


def test_a_gap_after_taking_the_copy_fails_the_job_named_and_the_next_one_opens_the_namespace_afresh(
        client, tmp_path, monkeypatch):
    _store, _first, second = _peer_folded(client, tmp_path)

    def trimmed(*_args):
        raise Gap()

    monkeypatch.setattr(shared_folds, "catch_up", trimmed)
    with pytest.raises(BackendUnavailable, match="changed faster than its index could be loaded; retry"):
        second.for_namespace("ns")
    monkeypatch.undo()
    again = second.for_namespace("ns")
    assert again.readiness.how in ("shared", "built") and len(_hits(again, "zebra")) == 10


def test_what_a_crash_between_the_renames_leaves_is_removed_when_the_worker_starts_again(client, tmp_path):
    store = _loaded(client)
    root = _root(tmp_path, "b")
    worker = _worker(client, root)
    worker.for_namespace("ns")
    worker.registry.close()
    name = directory_name("ns")
    (root / name).rename(root / f".{name}{shared_folds.OUTGOING}")  # the crash: one rename made, not the other
    (root / f".{name}{shared_folds.INCOMING}").mkdir()
    (root / f".{name}{shared_folds.INCOMING}" / "meta.json").write_text("{}")
    again = _worker(client, root)
    assert sorted(p.name for p in root.iterdir()) == ["ferret-store.txt"]
    _write(store, 0, 2)
    assert len(_hits(again.for_namespace("ns"), "zebra")) == 2
    assert (root / name / STATE_FILE).exists() and client.exists(keys.memories("ns"))
