"""Two real worker processes on one host: the second takes the first one's committed index of a namespace
instead of building it (``worker/backends/index_sharing.py``)."""

from __future__ import annotations

import os
import signal

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
