"""A worker's local indexes: one per namespace, following the change log,
kept on disk under one root and held to one memory bound.

Making a namespace's index ready for a job, in the order tried:
1. **warm**: the index is open and at least as new as the job's version
   (no Redis call), or catches up by applying the change-log entries after
   its version (``caught_up``): a write of k memories costs O(k), and is
   staged, not committed (``ferret.worker.backends.recent_changes``): searchable at
   once, committed in batches (``fold_changes`` on the job's path, or
   ``fold_seconds`` after a job, off it). The position saved on disk is the
   last commit's, so a process that opens the directory again stages the
   changes after it anew;
2. **on disk**: a directory this worker (or its previous work horse) left
   under the root is opened and caught up;
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

Memory: everything under the root (the indexes' files, memory-mapped when
open) counts against ``index_memory_mb``; past it the least recently used
namespaces are closed and their directories removed (``evictions``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import redis

from ferret import keys
from ferret.errors import BackendUnavailable
from ferret.records import Memory
from ferret.settings import LocalSettings
from ferret.worker.backends import snapshots
from ferret.worker.backends.change_log import ChangeLog, Position, as_text
from ferret.worker.backends.held_memories import HeldMemories
from ferret.worker.backends.tantivy_index import MemoryIndex
from ferret.worker.semantic.vectors import VectorIndex

logger = logging.getLogger(__name__)

NAME = "local"
STATE_FILE = "ferret-position.json"
BUILD_LOCK_SECONDS = 30
SCAN_BATCH = 1000
POLL_SECONDS = 0.05
# An open writer holds about this much (tantivy's arena); writers beyond MAX_OPEN_WRITERS are closed.
WRITER_BYTES = 4 * 1024 * 1024
MAX_OPEN_WRITERS = 4


EMPTY = Position(0, "0-0")  # the position of a namespace before its first write


class IndexNotReady(BackendUnavailable):
    """The namespace's index is being built and was not ready within the job's budget."""


class _Gap(Exception):
    """The change log no longer holds the entries after the index's version."""


@dataclass
class _Entry:
    namespace: str
    directory: Path
    position: Position
    bytes: int = 0
    used: float = field(default_factory=time.monotonic)
    index: MemoryIndex | None = None
    vectors: VectorIndex | None = None  # the embeddings, loaded at the first semantic search
    committed: Position | None = None  # the index's last commit (``position`` counts staged writes too)
    held: int = 0  # what it held when last counted into the registry's total (``_recount``)

    def __post_init__(self) -> None:
        if self.committed is None:
            self.committed = self.position


@dataclass(frozen=True)
class Readiness:
    """How a job's index was made ready (``stats.index``) and what it cost."""

    how: str  # warm | caught_up | disk | snapshot | built
    evictions: int = 0
    changes: int = 0  # change-log entries applied for this job (staged: searchable without a commit)
    staged: int = 0  # changes staged and not yet committed, after this job's catch-up
    folded: int = 0  # staged changes committed on this job's path (fold_changes reached)
    fold_ms: float = 0.0


def out_of_space(exc: BaseException) -> bool:
    """Whether an error is a full disk: ENOSPC, or tantivy's IO error carrying it as text."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return "No space left on device" in str(exc) or "os error 28" in str(exc)


def directory_bytes(directory: Path) -> int:
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file():
                    total += entry.stat().st_size
    return total


def _directory_name(namespace: str) -> str:
    return sha256(namespace.encode()).hexdigest()[:24]


def parse_memories(raw: Sequence[bytes | str | None], ids: list[str]) -> tuple[list[Memory], list[str]]:
    """Stored memories (untrusted JSON) and the ids with none (deleted, or unreadable)."""
    found: list[Memory] = []
    missing: list[str] = []
    for memory_id, value in zip(ids, raw, strict=True):
        if value is None:
            missing.append(memory_id)
            continue
        try:
            found.append(Memory.model_validate_json(value))
        except ValueError:
            logger.warning("memory %r unreadable; left out of the index", memory_id[:80])
            missing.append(memory_id)
    return found, missing


class IndexRegistry:
    def __init__(self, client: redis.Redis, settings: LocalSettings, root: Path,
                 builder_env: dict[str, str] | None = None) -> None:
        self.client = client
        self.settings = settings
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.builder_env = builder_env
        # Per-job bookkeeping stays O(1) in the namespaces held: ``_entries`` is kept in least
        # recently used order (``_touch``), the bytes held are a running total (``_recount``), and
        # the namespaces with staged writes and those with a writer open are kept apart.
        self._entries: dict[str, _Entry] = {}
        self._total = 0
        self._staged: dict[str, None] = {}
        self._writers: dict[str, None] = {}
        self._lock = threading.RLock()
        self.builds = 0
        self.evictions = 0
        self.folds = 0
        self.held = HeldMemories()  # memories read for hits, kept until a change names them
        self._adopt_directories()

    # -- the job's entry point -------------------------------------------------------------
    def index_for(self, namespace: str, at_least: int | None = None,
                  wait_seconds: float = 0.0) -> tuple[Position, MemoryIndex, Readiness]:
        with self._lock:
            try:
                return self._ready(namespace, at_least, wait_seconds)
            except redis.RedisError as exc:
                raise BackendUnavailable(NAME, f"memory store unreachable: {exc}") from exc
            except (OSError, ValueError) as exc:
                if not out_of_space(exc):
                    raise
                raise BackendUnavailable(NAME, f"no space left on the index disk ({self.root}): free some, or "
                                               "point backend.local.index_dir at a larger disk") from None

    def _ready(self, namespace: str, at_least: int | None, wait_seconds: float
               ) -> tuple[Position, MemoryIndex, Readiness]:
        entry = self._entries.get(namespace)
        if entry is not None and entry.index is not None and at_least is not None \
                and entry.position.version >= at_least:
            self._touch(entry)
            return entry.position, entry.index, Readiness("warm")
        how = "warm"
        if entry is not None and entry.index is None:
            how = "disk" if self._open_on_disk(entry) else how
            entry = self._entries.get(namespace)
        if entry is None or entry.index is None:
            entry, how = self._cold(namespace, wait_seconds, use_snapshot=True)
        try:
            changes = self._catch_up(entry)
        except _Gap:
            logger.info("namespace=%s change log no longer covers the index; loading afresh", namespace)
            self._drop(namespace)
            entry, how = self._cold(namespace, wait_seconds, use_snapshot=how != "snapshot")
            try:
                changes = self._catch_up(entry)
            except _Gap:
                raise BackendUnavailable(NAME, f"namespace {namespace!r} changed faster than its index "
                                               "could be loaded; retry") from None
        if how == "warm" and changes:
            how = "caught_up"
        assert entry.index is not None
        folded, fold_ms = 0, 0.0
        if len(entry.index.recent) >= self.settings.fold_changes:
            folded, fold_ms = self._fold(entry)
        elif len(entry.index.recent):
            self._staged[namespace] = None
        self._touch(entry)
        self._recount(entry)
        evicted = self._hold_to_bound(keep=namespace)
        return entry.position, entry.index, Readiness(how, evicted, changes, len(entry.index.recent), folded,
                                                      fold_ms)

    # -- committing staged writes ----------------------------------------------------------
    def _fold(self, entry: _Entry) -> tuple[int, float]:
        """Commit the entry's staged writes; how many, and the milliseconds it took."""
        assert entry.index is not None
        started = time.perf_counter()
        folded = entry.index.fold()
        self._staged.pop(entry.namespace, None)
        entry.committed = entry.position
        self._save_state(entry)
        entry.bytes = directory_bytes(entry.directory)
        self._recount(entry)
        self.folds += 1
        self._maybe_refresh_snapshot(entry)
        return folded, (time.perf_counter() - started) * 1000

    def fold_due(self, everything: bool = False) -> tuple[int, float]:
        """After a job (off its path): commit the staged writes of every namespace whose oldest
        has waited ``fold_seconds`` or that holds ``fold_changes`` (all, with ``everything``);
        how many changes, and the milliseconds it took."""
        folded, took = 0, 0.0
        with self._lock:
            now = time.monotonic()
            for namespace in list(self._staged):
                entry = self._entries.get(namespace)
                recent = entry.index.recent if entry is not None and entry.index is not None else None
                if entry is None or recent is None or not len(recent):
                    self._staged.pop(namespace, None)
                    continue
                if everything or len(recent) >= self.settings.fold_changes or \
                        now - (recent.since or now) >= self.settings.fold_seconds:
                    try:
                        count, ms = self._fold(entry)
                    except (OSError, ValueError, redis.RedisError) as exc:  # staged writes stay searchable
                        logger.warning("namespace=%s staged writes not committed (%s)", entry.namespace, exc)
                        continue
                    folded, took = folded + count, took + ms
        return folded, took

    # -- opening ---------------------------------------------------------------------------
    def _adopt_directories(self) -> None:
        """Directories a previous work horse of this worker left: known, opened on first use."""
        for path in self.root.iterdir() if self.root.exists() else ():
            state = path / STATE_FILE
            try:
                data = json.loads(state.read_text())
                namespace = str(data["namespace"])
                position = Position(int(data["version"]), str(data["entry"]))
            except (OSError, ValueError, KeyError, TypeError):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if path.name != _directory_name(namespace):
                shutil.rmtree(path, ignore_errors=True)
                continue
            self._add(_Entry(namespace, path, position, directory_bytes(path),
                             state.stat().st_mtime - time.time() + time.monotonic()))
        self._entries = dict(sorted(self._entries.items(), key=lambda item: item[1].used))

    def _open_on_disk(self, entry: _Entry) -> bool:
        """Open a directory left on disk, at the position its last commit saved (another work
        horse may have committed since this process read it)."""
        try:
            entry.index = MemoryIndex(str(entry.directory))
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                data = json.loads((entry.directory / STATE_FILE).read_text())
                entry.position = entry.committed = Position(int(data["version"]), str(data["entry"]))
            return True
        except (ValueError, OSError) as exc:
            logger.warning("namespace=%s index on disk unusable (%s); loading afresh", entry.namespace, exc)
            self._drop(entry.namespace)
            return False

    def _fresh_directory(self, namespace: str) -> Path:
        path = self.root / _directory_name(namespace)
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def _cold(self, namespace: str, wait_seconds: float, use_snapshot: bool) -> tuple[_Entry, str]:
        manifest = snapshots.read_manifest(self.client, namespace)
        count = int(self.client.hlen(keys.memories(namespace)))
        if manifest is not None and use_snapshot:
            entry = self._from_snapshot(namespace, manifest)
            if entry is not None:
                return entry, "snapshot"
        if count <= self.settings.inline_build_max:
            return self.build(namespace), "built"
        self.start_builder(namespace)
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline:
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            fresh = snapshots.read_manifest(self.client, namespace)
            if fresh is not None and (manifest is None or fresh.generation != manifest.generation):
                entry = self._from_snapshot(namespace, fresh)
                if entry is not None:
                    return entry, "snapshot"
        raise IndexNotReady(NAME, f"the index of namespace {namespace!r} ({count:,} memories) is being built "
                                  "by a builder process and was not ready within this job's budget; it is kept "
                                  "when done, so a retry in a few seconds will find it")

    def _from_snapshot(self, namespace: str, manifest: snapshots.Manifest) -> _Entry | None:
        directory = self._fresh_directory(namespace)
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
        entry = _Entry(namespace, directory, manifest.position, directory_bytes(directory), index=index)
        self._add(entry)
        self._save_state(entry)
        return entry

    def build(self, namespace: str) -> _Entry:
        """Build the namespace's index from its memories (a consistent read: the
        position first, then the memories; later writes are applied after).

        A namespace of fewer than ``fold_changes`` memories (an agent's first turns) is staged
        whole instead (``MemoryIndex.stage``): searchable the same, without a writer and a commit
        (~10 ms), and folded like any staged writes. Its directory then says nothing is committed
        (``EMPTY``), so a process that opens it again stages the log from the start, or builds
        afresh if the log no longer holds it."""
        log = ChangeLog(self.client, namespace)
        position = log.position()
        directory = self._fresh_directory(namespace)
        index = MemoryIndex(str(directory))
        pending: list[Memory] = []  # read, not yet handed to a writer (all of them while few)
        cursor = 0
        while True:
            cursor, page = self.client.hscan(keys.memories(namespace), cursor, count=SCAN_BATCH)
            assert isinstance(page, dict)
            ids = [as_text(k) for k in page]
            memories, _ = parse_memories(list(page.values()), ids)
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
        entry = _Entry(namespace, directory, position, directory_bytes(directory), index=index, committed=committed)
        self._add(entry)
        self._save_state(entry)
        return entry

    # -- following the change log ----------------------------------------------------------
    def _catch_up(self, entry: _Entry) -> int:
        """Apply every change after the entry's version, in order, each once; the number applied.
        Entries that are not ours are skipped: versions must still follow on, else it is a gap.
        A store that went back (a failover lost writes this index applied: the store's version
        is below the index's, or entries after the index's one reuse its versions) is a gap too."""
        assert entry.index is not None
        log = ChangeLog(self.client, entry.namespace)
        applied = 0
        while True:
            version, changes = log.after(entry.position)
            rewritten = any(c is not None and c.version <= entry.position.version for c in changes)
            if version < entry.position.version or rewritten:
                logger.warning("namespace=%s the store is behind this index (a failover lost writes it "
                               "applied)", entry.namespace)
                raise _Gap()
            if version == entry.position.version:
                break
            run = []
            expected = entry.position.version + 1
            for change in changes:
                if change is None:
                    logger.warning("namespace=%s change-log entry not ours; skipped", entry.namespace)
                    continue
                if change.version != expected:
                    raise _Gap()
                run.append(change)
                expected += 1
            if not run:
                raise _Gap()
            self._apply(entry, run)
            applied += len(run)
        return applied

    def _apply(self, entry: _Entry, changes: list) -> None:
        assert entry.index is not None
        clear = False
        touched: dict[str, None] = {}
        for change in changes:
            if change.op == "clear":
                clear, touched = True, {}
            else:
                touched.update(dict.fromkeys(change.ids))
        ids = list(touched)
        upserts: list[Memory] = []
        deletes: list[str] = []
        for start in range(0, len(ids), SCAN_BATCH):
            part = ids[start:start + SCAN_BATCH]
            found, missing = parse_memories(self.client.hmget(keys.memories(entry.namespace), part), part)
            upserts += found
            deletes += missing
        entry.index.stage(upserts=upserts, deletes=deletes, clear=clear)
        if clear:
            self.held.forget_namespace(entry.namespace)
        self.held.forget(entry.namespace, deletes)
        self.held.put(entry.namespace, upserts)
        if entry.vectors is not None:
            if clear:
                entry.vectors = VectorIndex()
            entry.vectors.delete(deletes)
            written = [m.id for m in upserts]
            for start in range(0, len(written), SCAN_BATCH):
                part = written[start:start + SCAN_BATCH]
                self._upsert_vectors(entry.vectors, entry.namespace, part,
                                     self.client.hmget(keys.embeddings(entry.namespace), part))
        last = changes[-1]
        entry.position = Position(last.version, last.entry)

    # -- the semantic retriever's vectors ----------------------------------------------------
    def nearest(self, namespace: str, query: npt.ArrayLike, limit: int) -> list[tuple[str, float]]:
        """The namespace's memories nearest ``query`` (ids, cosine). Its index must have been made
        ready for the job (``index_for``); its vectors are loaded from the embeddings hash the first
        time, then follow the change log with the index."""
        with self._lock:
            entry = self._entries.get(namespace)
            if entry is None or entry.index is None:
                raise BackendUnavailable(NAME, f"namespace {namespace!r} has no open index")
            if entry.vectors is None:
                try:
                    entry.vectors = self._load_vectors(namespace)
                except redis.RedisError as exc:
                    raise BackendUnavailable(NAME, f"memory store unreachable: {exc}") from exc
                self._recount(entry)
            self._touch(entry)
            return entry.vectors.nearest(query, limit)

    def _load_vectors(self, namespace: str) -> VectorIndex:
        """The namespace's stored embeddings; the size most of them have is the index's (one written
        with another size by someone else cannot set it)."""
        ids: list[str] = []
        raw: list[Any] = []
        cursor = 0
        while True:
            cursor, page = self.client.hscan(keys.embeddings(namespace), cursor, count=SCAN_BATCH)
            assert isinstance(page, dict)
            ids += [as_text(k) for k in page]
            raw += list(page.values())
            if cursor == 0:
                break
        sizes = Counter(len(v) for v in raw if isinstance(v, bytes) and v and len(v) % 4 == 0)
        vectors = VectorIndex(sizes.most_common(1)[0][0] // 4 if sizes else None)
        for start in range(0, len(ids), SCAN_BATCH):
            self._upsert_vectors(vectors, namespace, ids[start:start + SCAN_BATCH], raw[start:start + SCAN_BATCH])
        return vectors

    @staticmethod
    def _upsert_vectors(vectors: VectorIndex, namespace: str, ids: list[str], raw: list[Any]) -> None:
        """Stored embeddings (untrusted bytes) into ``vectors``; an id with none, or one of the
        wrong size, is taken out."""
        keep_ids: list[str] = []
        rows: list[npt.NDArray[np.float32]] = []
        gone: list[str] = []
        for memory_id, value in zip(ids, raw, strict=True):
            size = len(value) if isinstance(value, bytes) else 0
            if size == 0 or size % 4 or (vectors.dimensions and size != vectors.dimensions * 4) or \
                    (rows and size != rows[0].size * 4):
                if value is not None:
                    logger.warning("namespace=%s embedding of %r unreadable; left out", namespace, memory_id[:80])
                gone.append(memory_id)
                continue
            keep_ids.append(memory_id)
            rows.append(np.frombuffer(value, dtype="<f4"))
        if keep_ids:
            vectors.upsert(keep_ids, np.stack(rows))
        vectors.delete(gone)

    def _save_state(self, entry: _Entry) -> None:
        """Save the position of the index's last commit (staged writes are not on disk)."""
        committed = entry.committed or entry.position
        state = {"namespace": entry.namespace, "version": committed.version, "entry": committed.entry}
        temporary = entry.directory / (STATE_FILE + ".tmp")
        temporary.write_text(json.dumps(state))
        temporary.replace(entry.directory / STATE_FILE)

    # -- snapshots and builders ------------------------------------------------------------
    def _maybe_refresh_snapshot(self, entry: _Entry) -> None:
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

    # -- the memory bound ------------------------------------------------------------------
    @staticmethod
    def _held(entry: _Entry) -> int:
        """What an entry holds: its files and, while open, its writer."""
        return (entry.bytes + (WRITER_BYTES if entry.index is not None and entry.index.writing else 0)
                + (entry.vectors.nbytes if entry.vectors is not None else 0))

    def total_bytes(self) -> int:
        """What every entry holds, as last counted (``_recount``)."""
        return self._total

    def _add(self, entry: _Entry) -> None:
        old = self._entries.pop(entry.namespace, None)
        if old is not None:
            self._total -= old.held
        entry.held = 0
        self._entries[entry.namespace] = entry
        self._recount(entry)

    def _touch(self, entry: _Entry) -> None:
        """Used now: the entry moves to the most recently used end."""
        entry.used = time.monotonic()
        self._entries[entry.namespace] = self._entries.pop(entry.namespace)

    def _recount(self, entry: _Entry) -> None:
        """Count what ``entry`` holds now into the total, and note a writer it has open."""
        held = self._held(entry)
        self._total += held - entry.held
        entry.held = held
        if entry.index is not None and entry.index.writing:
            self._writers[entry.namespace] = None

    def _hold_to_bound(self, keep: str) -> int:
        """Close writers beyond ``MAX_OPEN_WRITERS`` (the least recently used first), then drop the
        least recently used namespaces other than ``keep`` while the total is over the bound."""
        if len(self._writers) > MAX_OPEN_WRITERS:
            writing = [e for e in map(self._entries.get, self._writers)
                       if e is not None and e.index is not None and e.index.writing]
            writing.sort(key=lambda e: e.used, reverse=True)
            for entry in writing[MAX_OPEN_WRITERS:]:
                assert entry.index is not None
                entry.index.release_writer()  # (staged writes are not in it: they stay searchable)
                self._recount(entry)
            self._writers = dict.fromkeys(e.namespace for e in writing[:MAX_OPEN_WRITERS])
        bound = self.settings.index_memory_mb * 1024 * 1024
        evicted = 0
        for namespace in list(self._entries) if self._total > bound else ():  # least recently used first
            if self._total <= bound:
                break
            if namespace != keep:
                self._drop(namespace)
                evicted += 1
        self.evictions += evicted
        return evicted

    def memories(self, namespace: str, ids: list[str],
                 read: Callable[[list[str]], dict[str, Memory]]) -> dict[str, Memory]:
        """The memories of ``ids``: those this worker holds (``HeldMemories``), the rest by ``read``."""
        with self._lock:
            return self.held.get(namespace, ids, read)

    def _drop(self, namespace: str) -> None:
        self.held.forget_namespace(namespace)
        entry = self._entries.pop(namespace, None)
        self._staged.pop(namespace, None)
        self._writers.pop(namespace, None)
        if entry is None:
            return
        self._total -= entry.held
        if entry.index is not None:
            entry.index.close()
        shutil.rmtree(entry.directory, ignore_errors=True)

    def close(self) -> None:
        self.fold_due(everything=True)
        for entry in self._entries.values():
            if entry.index is not None:
                entry.index.close()
