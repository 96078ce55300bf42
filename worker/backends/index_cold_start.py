"""Opening a namespace's index that this worker does not hold open: a directory left on disk, the prebuilt
snapshot in Redis, a build from the memories (a small namespace), or waiting for a builder process."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import redis

from ferret import keys
from ferret.settings import LocalSettings
from ferret.worker.backends import snapshots
from ferret.worker.backends.change_log import ChangeLog, as_text
from ferret.worker.backends.index_bound import HeldIndexes
from ferret.worker.backends.index_entry import (
    EMPTY,
    NAME,
    SCAN_BATCH,
    STATE_FILE,
    IndexEntry,
    IndexNotReady,
    directory_bytes,
    directory_name,
    parse_memories,
    read_state,
    save_state,
)
from ferret.worker.backends.index_sharing import PeerIndexes
from ferret.worker.backends.store_identity import local_store_identity
from ferret.worker.backends.tantivy_index import MemoryIndex

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05


class ColdStart:
    def __init__(self, client: redis.Redis, settings: LocalSettings, root: Path, indexes: HeldIndexes,
                 start_builder: Callable[[str], bool]) -> None:
        self.client = client
        self.settings = settings
        self.root = root
        self.indexes = indexes
        self.start_builder = start_builder
        self.builds = 0
        self.peers = PeerIndexes(root, lambda: local_store_identity(client))

    def adopt_directories(self) -> None:
        """Directories a previous work horse of this worker left: known, opened on first use."""
        for path in self.root.iterdir() if self.root.exists() else ():
            if not path.is_dir():
                continue  # the root's own files (``index_sharing.STORE_FILE``)
            try:
                namespace, position = read_state(path)
            except (OSError, ValueError, KeyError, TypeError):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if path.name != directory_name(namespace):
                shutil.rmtree(path, ignore_errors=True)
                continue
            stamp = (path / STATE_FILE).stat().st_mtime
            self.indexes.add(IndexEntry(namespace, path, position, directory_bytes(path),
                                        stamp - time.time() + time.monotonic()))
        self.indexes.sort_by_use()

    def open_on_disk(self, entry: IndexEntry) -> bool:
        """Open a directory left on disk, at the position its last commit saved (another work
        horse may have committed since this process read it)."""
        try:
            entry.index = MemoryIndex(str(entry.directory))
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                _, position = read_state(entry.directory)
                entry.position = entry.committed = position
            return True
        except (ValueError, OSError) as exc:
            logger.warning("namespace=%s index on disk unusable (%s); loading afresh", entry.namespace, exc)
            self.indexes.drop(entry.namespace)
            return False

    def fresh_directory(self, namespace: str) -> Path:
        path = self.root / directory_name(namespace)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def cold(self, namespace: str, wait_seconds: float, use_snapshot: bool,
             use_peers: bool = True) -> tuple[IndexEntry, str]:
        """A snapshot, else another worker's copy or a build (a small namespace), else a builder's snapshot
        waited for."""
        manifest = snapshots.read_manifest(self.client, namespace)
        count = int(self.client.hlen(keys.memories(namespace)))
        if manifest is not None and use_snapshot:
            entry = self.from_snapshot(namespace, manifest)
            if entry is not None:
                return entry, "snapshot"
        if count <= self.settings.inline_build_max:
            if use_peers and count >= self.settings.fold_changes:  # a smaller one is staged whole: cheaper
                entry = self.from_peer(namespace)
                if entry is not None:
                    return entry, "shared"
            return self.build(namespace), "built"
        self.start_builder(namespace)
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            fresh = snapshots.read_manifest(self.client, namespace)
            if fresh is not None and (manifest is None or fresh.generation != manifest.generation):
                entry = self.from_snapshot(namespace, fresh)
                if entry is not None:
                    return entry, "snapshot"
        raise IndexNotReady(NAME, f"the index of namespace {namespace!r} ({count:,} memories) is being built "
                                  "by a builder process and was not ready within this job's budget; it is kept "
                                  "when done, so a retry in a few seconds will find it")

    def from_peer(self, namespace: str) -> IndexEntry | None:
        """Another worker's committed index of ``namespace`` on this host, by hard links
        (``index_sharing``); None when none can be taken."""
        directory = self.fresh_directory(namespace)
        try:
            taken = self.peers.take(namespace, directory)
        except (OSError, redis.RedisError) as exc:  # the peers' roots unreadable, the store's identity
            logger.info("namespace=%s no peer's index looked at (%s)", namespace, exc)
            taken = None
        if taken is None:
            return None
        index, position = taken
        entry = IndexEntry(namespace, directory, position, directory_bytes(directory), index=index)
        self.indexes.add(entry)
        save_state(entry)
        return entry

    def from_snapshot(self, namespace: str, manifest: snapshots.Manifest) -> IndexEntry | None:
        directory = self.fresh_directory(namespace)
        if not snapshots.load(self.client, namespace, manifest, directory):
            logger.warning("namespace=%s snapshot %s incomplete; ignored", namespace, manifest.generation)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        try:
            index = MemoryIndex(str(directory))
        except (ValueError, OSError) as exc:
            logger.warning("namespace=%s snapshot %s unusable (%s); ignored", namespace, manifest.generation, exc)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        entry = IndexEntry(namespace, directory, manifest.position, directory_bytes(directory), index=index)
        self.indexes.add(entry)
        save_state(entry)
        return entry

    def build(self, namespace: str) -> IndexEntry:
        """Build the namespace's index from its memories (a consistent read: the
        position first, then the memories; later writes are applied after).

        A namespace of fewer than ``fold_changes`` memories (an agent's first turns) is staged
        whole instead (``MemoryIndex.stage``): searchable the same, without a writer and a commit
        (~10 ms), and folded like any staged writes. Its directory then says nothing is committed
        (``EMPTY``), so a process that opens it again stages the log from the start, or builds
        afresh if the log no longer holds it."""
        position = ChangeLog(self.client, namespace).position()
        directory = self.fresh_directory(namespace)
        index = MemoryIndex(str(directory))
        pending: list = []  # read, not yet handed to a writer (all of them while few)
        cursor = 0
        while True:
            cursor, page = self.client.hscan(keys.memories(namespace), cursor, count=SCAN_BATCH)
            assert isinstance(page, dict)
            memories, _ = parse_memories(list(page.values()), [as_text(k) for k in page])
            pending += memories
            if len(pending) >= self.settings.fold_changes:
                index.apply(upserts=pending, commit=False, fresh=True)
                pending = []
            if cursor == 0:
                break
        committed = position
        if index.writing:
            if pending:
                index.apply(upserts=pending, commit=False, fresh=True)
            index.commit()
        else:
            index.stage(upserts=pending)
            committed = EMPTY
        self.builds += 1
        entry = IndexEntry(namespace, directory, position, directory_bytes(directory), index=index,
                           committed=committed)
        self.indexes.add(entry)
        save_state(entry)
        return entry
