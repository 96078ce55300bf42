"""The local backend with real Redis and real workers of both classes: writes
and deletes reach every worker through the change log, indexes stay within
the memory bound, a cold worker loads the snapshot, and a build outlives the
worker that started it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from ferret import keys
from ferret.records import Memory
from ferret.worker.backends import snapshots
from ferret.worker.backends.local import MemoryStore


def _filler(count: int, prefix: str = "f") -> list[Memory]:
    return [Memory(id=f"{prefix}{i}", content_title=f"harbour ledger entry {i}",
                   content_body=f"routine harbour ledger line number {i} about cargo and tides") for i in range(count)]


def _ask(producer, query: str, namespace: str, **request):
    result = producer.wait(producer.enqueue({"query": query, "namespace": namespace,
                                             "options": {"cache": False}, **request}), 30)
    assert result is not None
    return result


def test_writes_and_deletes_reach_every_worker_of_both_classes(producer, redis_client, start_workers):
    store = MemoryStore(redis_client, "agent")
    store.upsert(_filler(300))
    (simple,) = start_workers(1, "--worker-class", "simple")
    start_workers(1, "--worker-class", "fork")
    served_by = set()
    for turn in range(16):
        store.upsert([Memory(id=f"turn{turn}", content_title=f"turn {turn} marmalade zeppelin{turn}")])
        result = _ask(producer, f"marmalade zeppelin{turn}", "agent")
        assert result.status == "ok" and result.results[0].id == f"turn{turn}", turn
        served_by.add(result.worker)
    by_simple = {w for w in served_by if w.endswith(f":{simple.pid}")}
    assert by_simple and served_by - by_simple, "both workers (the fork one: its work horses) answered turns"
    assert store.delete([f"turn{t}" for t in range(16)]) == 16
    for _ in range(8):
        result = _ask(producer, "marmalade", "agent")
        assert result.status == "ok" and not any(r.id.startswith("turn") for r in result.results)


def test_indexes_stay_within_the_bound(producer, redis_client, start_workers, tmp_path):
    for n in range(8):
        MemoryStore(redis_client, f"tenant{n}").upsert(_filler(200, prefix=f"t{n}-"))
    start_workers(1, "--worker-class", "simple",
                  extra_env={"FERRET_BACKEND__LOCAL__INDEX_MEMORY_MB": "16",
                             "FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path)})
    evictions = 0
    for n in range(8):
        result = _ask(producer, "harbour ledger cargo", f"tenant{n}")
        assert result.status == "ok" and result.results and result.results[0].id.startswith(f"t{n}-")
        evictions += result.stats.index_evictions or 0
    assert evictions > 0
    (root,) = tmp_path.iterdir()
    assert 0 < len(list(root.iterdir())) < 8, "evicted namespaces leave no index behind"
    again = _ask(producer, "harbour ledger cargo", "tenant0")
    assert again.status == "ok" and again.stats.index == "built" and again.results[0].id.startswith("t0-")


def test_a_cold_worker_loads_the_snapshot_ferret_ingest_built(env, producer, redis_client, start_workers, tmp_path):
    lines = tmp_path / "big.jsonl"
    lines.write_text("".join(m.model_dump_json() + "\n" for m in _filler(6_000)) + "{broken\n")
    ingest = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(lines), "-n", "big",
                             "--batch-size", "500"], env=env, capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 1, "one line was malformed"
    assert "stored 6000 memories" in ingest.stdout and "line 6001" in ingest.stderr
    assert "index snapshot stored: 6,000 memories" in ingest.stderr
    MemoryStore(redis_client, "big").upsert([Memory(id="late", content_title="harbour ledger walrus")])
    start_workers(1, "--worker-class", "fork")
    first = _ask(producer, "walrus", "big")
    assert first.status == "ok" and first.stats.index == "snapshot" and first.stats.index_changes == 1
    assert [r.id for r in first.results] == ["late"]


def test_a_build_outlives_the_worker_that_started_it(env, producer, redis_client, start_workers):
    MemoryStore(redis_client, "huge").upsert(_filler(8_000))
    (worker,) = start_workers(1, "--worker-class", "simple",
                              extra_env={"FERRET_BACKEND__LOCAL__BUILD_WAIT_SECONDS": "0"})
    waiting = _ask(producer, "harbour ledger", "huge")
    assert waiting.status == "failed" and "is being built" in (waiting.error or "")
    assert redis_client.exists(keys.index_build_lock("huge"))
    worker.send_signal(signal.SIGKILL)  # the worker dies mid-build; the builder is in its own session
    worker.wait(timeout=10)
    deadline = time.monotonic() + 120
    while snapshots.read_manifest(redis_client, "huge") is None and time.monotonic() < deadline:
        time.sleep(0.1)
    manifest = snapshots.read_manifest(redis_client, "huge")
    assert manifest is not None and manifest.memories == 8_000
    released = time.monotonic() + 15  # the builder stores the manifest, then lets its lock go
    while redis_client.exists(keys.index_build_lock("huge")) and time.monotonic() < released:
        time.sleep(0.05)
    assert not redis_client.exists(keys.index_build_lock("huge")), "the builder let its lock go"
    start_workers(1, "--worker-class", "fork")
    served = _ask(producer, "harbour ledger", "huge")
    assert served.status == "ok" and served.stats.index == "snapshot" and served.results
