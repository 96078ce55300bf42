"""Two real worker processes on one host: the second takes the first one's committed index of a namespace
instead of building it (``worker/backends/index_sharing.py``)."""

from __future__ import annotations

import os
import signal

import pytest

from ferret.records import Memory
from ferret.worker.backends.index_entry import directory_name
from ferret.worker.backends.local import MemoryStore
from tests.timing import scaled


def test_a_second_worker_process_takes_the_first_ones_index_and_answers_the_same(
        start_workers, producer, redis_client, tmp_path):
    MemoryStore(redis_client, "shared-ns").upsert(
        [Memory(id=f"m{i}", content_title=f"bitcoin note {i}", content_body=f"the {i}th bitcoin story")
         for i in range(60)])  # more than fold_changes: committed, not staged whole
    extra = {"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path)}
    request = {"query": "bitcoin story", "namespace": "shared-ns", "options": {"cache": False}}
    first, = start_workers(1, extra_env=extra)
    built = producer.wait(producer.enqueue(dict(request)), scaled(30))
    assert built is not None and built.status == "ok" and built.stats.index == "built"
    first.send_signal(signal.SIGSTOP)  # alive, its copy on disk, but taking no job
    try:
        start_workers(1, extra_env=extra)
        MemoryStore(redis_client, "shared-ns").upsert([Memory(id="late", content_title="bitcoin story zebra")])
        taken = producer.wait(producer.enqueue(dict(request, query="bitcoin story zebra")), scaled(30))
        assert taken is not None and taken.status == "ok" and taken.stats.index == "shared"
        assert taken.results[0].id == "late"  # caught up past the peer's commit
        again = producer.wait(producer.enqueue(dict(request)), scaled(30))
        assert again is not None and again.stats.index in ("warm", "caught_up")
        others = [item.id for item in again.results if item.id != "late"]  # the write since: the rest as built
        assert others and others == [item.id for item in built.results][:len(others)]
    finally:
        first.send_signal(signal.SIGCONT)
    roots = [root for root in tmp_path.iterdir() if (root / directory_name("shared-ns")).is_dir()]
    assert len(roots) == 2
    files = [sorted(name for name in os.listdir(root / directory_name("shared-ns")) if name.endswith(".store"))
             for root in roots]
    linked = set(files[0]) & set(files[1])
    assert linked and all(os.path.samefile(roots[0] / directory_name("shared-ns") / name,
                                           roots[1] / directory_name("shared-ns") / name) for name in linked)


def _root_of(base, proc):
    """A worker process's index root under ``base`` (named ``ferret-index-<host>-<pid>-<suffix>``)."""
    roots = [root for root in base.iterdir() if root.name.rsplit("-", 2)[1] == str(proc.pid)]
    assert len(roots) == 1
    return roots[0]


@pytest.mark.parametrize("second_class", ["simple", "fork"])
def test_the_second_worker_takes_the_fold_the_first_one_made_instead_of_committing_it_again(
        start_workers, producer, redis_client, tmp_path, second_class):
    """Two real workers, one per queue so each job's worker is known: the staged writes the first one
    commits are taken by the second as its fold (``worker/backends/shared_folds.py``); a forking worker's
    work horse takes it the same way (it indexes under its worker's root)."""
    store = MemoryStore(redis_client, "fold-ns")
    store.upsert([Memory(id=f"m{i}", content_title=f"bitcoin note {i}", content_body=f"the {i}th bitcoin story")
                  for i in range(60)])
    extra = {"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path)}
    first, = start_workers(1, "batch", extra_env=extra)
    second, = start_workers(1, "prefetch", "--worker-class", second_class, extra_env=extra)

    def ask(queue, query="bitcoin zebra"):
        result = producer.wait(producer.enqueue({"query": query, "namespace": "fold-ns", "queue": queue,
                                                 "options": {"cache": False}}), scaled(30))
        assert result is not None and result.status == "ok"
        return result

    assert ask("batch").stats.index == "built"
    assert ask("prefetch").stats.index == "shared"
    for i in range(32):  # backend.local.fold_changes: one change-log entry each
        store.upsert([Memory(id=f"w{i}", content_title=f"zebra {i}", content_body="a bitcoin zebra written late")])
    by_first = ask("batch")
    assert by_first.stats.index_folded == 32 and by_first.stats.index_fold_taken is None
    by_second = ask("prefetch")
    assert by_second.stats.index_folded == 32 and by_second.stats.index_staged is None
    assert by_second.stats.index_fold_taken is True
    assert [item.id for item in by_second.results] == [item.id for item in by_first.results]
    assert any(item.id.startswith("w") for item in by_second.results)
    mine, theirs = (_root_of(tmp_path, proc) / directory_name("fold-ns") for proc in (second, first))
    segments = sorted(name for name in os.listdir(theirs) if name.endswith(".store"))
    assert segments == sorted(name for name in os.listdir(mine) if name.endswith(".store"))
    assert all(os.path.samefile(mine / name, theirs / name) for name in segments)  # linked, not committed again
