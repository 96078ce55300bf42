"""A worker's local indexes: one per namespace, following the change log,
kept on disk under one root and held to one memory bound.

Making a namespace's index ready for a job, in the order tried:
1. **warm**: the index is open and at least as new as the job's version
   (no Redis call), or catches up by applying the change-log entries after
   its version (``caught_up``, ``index_catch_up``): a write of k memories costs
   O(k), and is staged, not committed (``ferret.worker.backends.recent_changes``):
   searchable at once, committed in batches (``fold_changes`` on the job's path,
   or ``fold_seconds`` after a job, off it). The position saved on disk is the
   last commit's, so a process that opens the directory again stages the
   changes after it anew;
2. **on disk**: a directory this worker (or its previous work horse) left
   under the root is opened and caught up (``index_cold_start``);
3. **snapshot**: the prebuilt snapshot in Redis is loaded and caught up;
4. **built**: a namespace of at most ``inline_build_max`` memories is built
   from the memories in the job (small: tens of milliseconds);
5. otherwise a builder process (``ferret.worker.backends.index_builder``, its own
   session, so neither a job's hard timeout nor the worker's death stops
   it) builds the snapshot, and the job waits for it as long as its budget
   allows, else fails ``IndexNotReady`` with a clear error; the build goes on
   and is kept for the next job and every other worker.
A builder is also started when a big namespace's snapshot falls more than
``snapshot_refresh_changes`` versions behind, so cold workers stay fast.

Memory: ``index_bound.HeldIndexes`` holds everything to ``index_memory_mb``.
The semantic retriever's vectors: ``index_vectors``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy.typing as npt
import redis

from ferret import keys
from ferret.errors import BackendUnavailable
from ferret.records import Memory
from ferret.settings import LocalSettings
from ferret.worker.backends import snapshots
from ferret.worker.backends.change_log import Position
from ferret.worker.backends.held_memories import HeldMemories
from ferret.worker.backends.index_bound import HeldIndexes
from ferret.worker.backends.index_catch_up import Gap, catch_up
from ferret.worker.backends.index_cold_start import ColdStart
from ferret.worker.backends.index_entry import (
    EMPTY,
    NAME,
    IndexEntry,
    IndexNotReady,
    Readiness,
    directory_bytes,
    out_of_space,
    parse_memories,
    save_state,
)
from ferret.worker.backends.index_vectors import load_vectors
from ferret.worker.backends.shared_folds import take_peers_fold
from ferret.worker.backends.tantivy_index import MemoryIndex

__all__ = ["BUILD_LOCK_SECONDS", "EMPTY", "IndexNotReady", "IndexRegistry", "Readiness", "directory_bytes",
           "out_of_space", "parse_memories"]

logger = logging.getLogger(__name__)

BUILD_LOCK_SECONDS = 30


class IndexRegistry:
    def __init__(self, client: redis.Redis, settings: LocalSettings, root: Path,
                 builder_env: dict[str, str] | None = None) -> None:
        self.client = client
        self.settings = settings
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.builder_env = builder_env
        self._lock = threading.RLock()
        self.folds = 0
        self.held = HeldMemories()  # memories read for hits, kept until a change names them
        self.indexes = HeldIndexes(self.held)
        self.cold_start = ColdStart(client, settings, root, self.indexes, self.start_builder)
        self.cold_start.adopt_directories()

    @property
    def builds(self) -> int:
        return self.cold_start.builds

    @property
    def evictions(self) -> int:
        return self.indexes.evictions

    def total_bytes(self) -> int:
        """What every index holds, as last counted."""
        return self.indexes.total

    # -- the job's entry point -------------------------------------------------------------
    def index_for(self, namespace: str, at_least: int | None = None,
                  wait_seconds: float = 0.0) -> tuple[Position, MemoryIndex, Readiness]:
        with self._lock:
            try:
                return self._ready(namespace, at_least, wait_seconds)
            except redis.RedisError as exc:
                raise BackendUnavailable(NAME, f"memory store unreachable: {exc}") from exc
            except (OSError, ValueError) as exc:
                if not out_of_space(exc, self.root):
                    raise
                raise BackendUnavailable(NAME, f"no space left on the index disk ({self.root}): free some, or "
                                               "point backend.local.index_dir at a larger disk") from None

    def _ready(self, namespace: str, at_least: int | None, wait_seconds: float
               ) -> tuple[Position, MemoryIndex, Readiness]:
        entry = self.indexes.entries.get(namespace)
        if entry is not None and entry.index is not None and at_least is not None \
                and entry.position.version >= at_least:
            self.indexes.touch(entry)
            return entry.position, entry.index, Readiness("warm")
        entry, how, changes = self._opened_and_caught_up(namespace, entry, wait_seconds)
        assert entry.index is not None
        folded, fold_ms, taken = 0, 0.0, False
        if len(entry.index.recent) >= self.settings.fold_changes:
            try:
                folded, fold_ms, taken = self._fold(entry)
            except (OSError, ValueError):
                # The commit failed (a full disk): the index on disk may be half written. It is dropped, so
                # the next job opens the namespace afresh (snapshot or build) once there is room, with no
                # restart; this job fails, named.
                self.indexes.drop(namespace)
                raise
        elif len(entry.index.recent):
            self.indexes.staged[namespace] = None
        self.indexes.touch(entry)
        self.indexes.recount(entry)
        evicted = self.indexes.hold_to_bound(namespace, self.settings.index_memory_mb * 1024 * 1024)
        return entry.position, entry.index, Readiness(how, evicted, changes, len(entry.index.recent), folded,
                                                      fold_ms, taken)

    def _opened_and_caught_up(self, namespace: str, entry: IndexEntry | None, wait_seconds: float
                              ) -> tuple[IndexEntry, str, int]:
        """The namespace's index open and caught up with the change log: the entry, how it was
        opened, and how many changes it applied."""
        how = "warm"
        if entry is not None and entry.index is None:
            how = "disk" if self.cold_start.open_on_disk(entry) else how
            entry = self.indexes.entries.get(namespace)
        if entry is None or entry.index is None:
            entry, how = self.cold_start.cold(namespace, wait_seconds, use_snapshot=True)
        try:
            changes = catch_up(self.client, entry, self.held)
        except Gap:
            logger.info("namespace=%s change log no longer covers the index; loading afresh", namespace)
            self.indexes.drop(namespace)
            entry, how = self.cold_start.cold(namespace, wait_seconds, use_snapshot=how != "snapshot",
                                              use_peers=how != "shared")
            try:
                changes = catch_up(self.client, entry, self.held)
            except Gap:
                raise BackendUnavailable(NAME, f"namespace {namespace!r} changed faster than its index "
                                               "could be loaded; retry") from None
        return entry, ("caught_up" if how == "warm" and changes else how), changes

    def build(self, namespace: str) -> IndexEntry:
        """Build the namespace's index from its memories (``ColdStart.build``)."""
        return self.cold_start.build(namespace)

    # -- committing staged writes ----------------------------------------------------------
    def _fold(self, entry: IndexEntry) -> tuple[int, float, bool]:
        """Commit the entry's staged writes, or take the commit of them another worker on this host has
        made (``shared_folds``); how many, the milliseconds it took, and whether it was taken."""
        assert entry.index is not None
        started = time.perf_counter()
        staged = len(entry.index.recent)
        try:
            taken = take_peers_fold(self.cold_start.peers, self.client, entry, self.held, self.settings.fold_changes)
        except Gap:  # the copy is in place, the changes after it are no longer in the log: opened afresh
            self.indexes.drop(entry.namespace)
            raise BackendUnavailable(NAME, f"namespace {entry.namespace!r} changed faster than its index "
                                           "could be loaded; retry") from None
        except (OSError, ValueError):  # the copy in place did not open: the next job opens the namespace afresh
            self.indexes.drop(entry.namespace)
            raise
        assert entry.index is not None
        if taken:
            folded = max(0, staged - len(entry.index.recent))
            self.indexes.staged.pop(entry.namespace, None)
            if len(entry.index.recent):  # staged again just now: the namespace's oldest change is now
                self.indexes.staged[entry.namespace] = None
        else:
            folded = entry.index.fold()
            self.indexes.staged.pop(entry.namespace, None)
            entry.committed = entry.position
            save_state(entry)
            self.folds += 1
            self._maybe_refresh_snapshot(entry)
        entry.bytes = directory_bytes(entry.directory)
        self.indexes.recount(entry)
        return folded, (time.perf_counter() - started) * 1000, taken

    def fold_due(self, everything: bool = False) -> tuple[int, float, int]:
        """After a job (off its path): commit the staged writes of every namespace whose oldest
        has waited ``fold_seconds`` or that holds ``fold_changes`` (all, with ``everything``);
        how many changes, the milliseconds it took, and how many folds were taken from a peer.

        ``staged`` holds the namespaces in the order their oldest staged change came (one joins when
        its first change since a commit is staged, and leaves when committed or dropped), so the look
        stops at the first one not yet due: a job pays for the namespaces due, not for every namespace
        holding staged writes (an agent service's thousands). One that reaches ``fold_changes`` is
        committed by ``index_for`` as it stages them."""
        folded, took, taken = 0, 0.0, 0
        with self._lock:
            now = time.monotonic()
            gone: list[str] = []
            due: list[IndexEntry] = []
            for namespace in self.indexes.staged:
                entry = self.indexes.entries.get(namespace)
                recent = entry.index.recent if entry is not None and entry.index is not None else None
                if entry is None or recent is None or not len(recent):
                    gone.append(namespace)
                elif everything or len(recent) >= self.settings.fold_changes or \
                        now - (recent.since or now) >= self.settings.fold_seconds:
                    due.append(entry)
                else:
                    break  # every namespace after it staged its oldest change later
            for namespace in gone:
                self.indexes.staged.pop(namespace, None)
            for entry in due:
                try:
                    count, ms, shared = self._fold(entry)
                except (OSError, ValueError, redis.RedisError, BackendUnavailable) as exc:  # still searchable
                    logger.warning("namespace=%s staged writes not committed (%s)", entry.namespace, exc)
                    continue
                folded, took, taken = folded + count, took + ms, taken + shared
        return folded, took, taken

    # -- the semantic retriever's vectors ----------------------------------------------------
    def nearest(self, namespace: str, query: npt.ArrayLike, limit: int) -> list[tuple[str, float]]:
        """The namespace's memories nearest ``query`` (ids, cosine). Its index must have been made
        ready for the job (``index_for``); its vectors are loaded from the embeddings hash the first
        time, then follow the change log with the index."""
        with self._lock:
            entry = self.indexes.entries.get(namespace)
            if entry is None or entry.index is None:
                raise BackendUnavailable(NAME, f"namespace {namespace!r} has no open index")
            if entry.vectors is None:
                try:
                    entry.vectors = load_vectors(self.client, namespace)
                except redis.RedisError as exc:
                    raise BackendUnavailable(NAME, f"memory store unreachable: {exc}") from exc
                self.indexes.recount(entry)
            self.indexes.touch(entry)
            return entry.vectors.nearest(query, limit)

    # -- snapshots and builders ------------------------------------------------------------
    def _maybe_refresh_snapshot(self, entry: IndexEntry) -> None:
        if len(entry.index or ()) <= self.settings.inline_build_max:
            return
        manifest = snapshots.read_manifest(self.client, entry.namespace)
        behind = entry.position.version - (manifest.position.version if manifest else 0)
        if manifest is None or behind > self.settings.snapshot_refresh_changes:
            self.start_builder(entry.namespace)

    def start_builder(self, namespace: str) -> bool:
        """Start a builder process unless one holds the namespace's build lock."""
        token = uuid.uuid4().hex
        if not self.client.set(keys.index_build_lock(namespace), token, nx=True, ex=BUILD_LOCK_SECONDS):
            return False
        command = [sys.executable, "-m", "ferret.worker.backends.index_builder", "--namespace", namespace,
                   "--lock-token", token]
        env = {**os.environ, **(self.builder_env or {})}
        subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         start_new_session=True)
        logger.info("namespace=%s started an index builder", namespace)
        return True

    # -- the rest --------------------------------------------------------------------------
    def memories(self, namespace: str, ids: list[str],
                 read: Callable[[list[str]], dict[str, Memory]]) -> dict[str, Memory]:
        """The memories of ``ids``: those this worker holds (``HeldMemories``), the rest by ``read``."""
        with self._lock:
            return self.held.get(namespace, ids, read)

    def close(self) -> None:
        self.fold_due(everything=True)
        for entry in self.indexes.entries.values():
            if entry.index is not None:
                entry.index.close()
