"""A full index disk is said as such: the job ends with a message naming the
disk and the setting, never tantivy's IO error text, and the worker serves on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ferret.records import Memory
from ferret.worker.backends.index_registry import out_of_space
from ferret.worker.backends.local import MemoryStore

# tantivy's own words for ENOSPC, as a 4 KiB tmpfs made it say them (see the real-disk test below)
TANTIVY_ENOSPC = ValueError("An IO error occurred: 'No space left on device (os error 28) at path "
                            "\"/tmp/tinyfs/idx/1b16b1df538ba12dc3f97edb/.tmpmLAILl\"'")


def test_a_full_disk_is_recognised_in_each_form_it_takes():
    assert out_of_space(TANTIVY_ENOSPC)
    assert out_of_space(OSError(28, "No space left on device"))
    assert not out_of_space(ValueError("An IO error occurred: 'Permission denied (os error 13)'"))


def _disk(tmp_path, size: str):
    """A tmpfs of ``size`` mounted for the test (skipped where mounting needs rights the test lacks)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def tiny_disk(tmp_path):
    yield from _disk(tmp_path, "4k")


def test_a_job_on_a_full_index_disk_fails_with_a_message_naming_it(tiny_disk, producer, redis_client, start_workers):
    MemoryStore(redis_client, "full").upsert([Memory(id=f"m{n}", content_body=f"memory {n} about btc and eth " * 5)
                                               for n in range(3000)])
    [worker] = start_workers(1, extra_env={"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tiny_disk)})
    result = producer.wait(producer.enqueue({"query": "btc", "namespace": "full", "options": {"cache": False}}), 60)
    assert result.status == "failed"
    assert f"no space left on the index disk ({tiny_disk}/" in result.error  # the worker's directory there
    assert "backend.local.index_dir" in result.error
    assert "ValueError" not in result.error and "os error" not in result.error
    assert worker.poll() is None
    subprocess.run(["umount", "-l", str(tiny_disk)], check=True)  # room again: the worker serves on
    after = producer.wait(producer.enqueue({"query": "btc", "namespace": "full", "options": {"cache": False}}), 60)
    assert after.status == "ok" and after.results


def _fill(disk) -> None:
    """Every byte of the disk taken by a file, as another program's writes would."""
    descriptor = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(descriptor, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(descriptor)


@pytest.fixture
def small_disk(tmp_path):
    yield from _disk(tmp_path, "8m")


@pytest.mark.parametrize(("worker_class", "replacing"), [("simple", 400), ("fork", 400), ("simple", 10)])
def test_an_index_that_failed_a_replace_on_a_full_disk_recovers_once_there_is_room(
        worker_class, replacing, small_disk, producer, redis_client, start_workers, env, tmp_path):
    """400 new memories are committed on the job's path (more than fold_changes); 10 are staged and
    committed after the job (fold_seconds 0), where a failure leaves them staged."""
    old = [Memory(id=f"old{n}", content_body=f"memory {n} about btc and the old plan") for n in range(200)]
    MemoryStore(redis_client, "swap").upsert(old)
    [worker] = start_workers(1, "--worker-class", worker_class,
                             extra_env={"FERRET_BACKEND__LOCAL__INDEX_DIR": str(small_disk),
                                        "FERRET_BACKEND__LOCAL__FOLD_SECONDS": "0"})

    def ask() -> object:
        return producer.wait(producer.enqueue({"query": "btc", "namespace": "swap", "options": {"cache": False}}), 60)

    before = ask()
    assert before.status == "ok" and before.results and before.results[0].id.startswith("old")
    _fill(small_disk)
    new = tmp_path / "new.jsonl"
    new.write_text("".join(f'{{"id": "new{n}", "content_body": "memory {n} about btc and the new plan {"x" * 200}"}}\n'
                           for n in range(replacing)))
    replaced = subprocess.run([sys.executable, "-m", "ferret.cli.main", "ingest", str(new), "--namespace", "swap",
                               "--replace", "--no-index", "--quiet"], env=env, capture_output=True, text=True)
    assert replaced.returncode == 0, replaced.stderr
    for _ in range(3):  # the replace's commit has no room: named so, never an "internal error" or old answers
        full = ask()
        assert full.status != "ok" or (full.results and all(h.id.startswith("new") for h in full.results)), full
        if full.status != "ok":
            assert "no space left on the index disk" in full.error, full.error
    (small_disk / "filler").unlink()  # room again
    after = ask()
    assert worker.poll() is None
    assert after.status == "ok", (after.status, after.error)
    assert after.results and all(hit.id.startswith("new") for hit in after.results), after.results[:3]
