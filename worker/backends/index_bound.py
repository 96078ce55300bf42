"""The indexes a worker holds, in least-recently-used order, held to one memory bound.

Per-job bookkeeping stays O(1) in the namespaces held: the entries are kept in least recently used
order (``touch``), the bytes held are a running total (``recount``), and the namespaces with staged
writes and those with a writer open are kept apart. Everything under the root (the indexes' files,
memory-mapped when open), an open writer's arena and loaded vectors count against
``index_memory_mb``; past it the least recently used namespaces are closed and their directories
removed (``evictions``); writers beyond ``MAX_OPEN_WRITERS`` are closed first."""

from __future__ import annotations

import shutil
import time

from ferret.worker.backends.held_memories import HeldMemories
from ferret.worker.backends.index_entry import IndexEntry

# An open writer holds about this much (tantivy's arena); writers beyond MAX_OPEN_WRITERS are closed.
WRITER_BYTES = 4 * 1024 * 1024
MAX_OPEN_WRITERS = 4


class HeldIndexes:
    def __init__(self, memories: HeldMemories) -> None:
        self.memories = memories  # the memories read for hits: forgotten with their namespace
        self.entries: dict[str, IndexEntry] = {}
        self.total = 0
        self.staged: dict[str, None] = {}
        self.writers: dict[str, None] = {}
        self.evictions = 0

    @staticmethod
    def held(entry: IndexEntry) -> int:
        """What an entry holds: its files and, while open, its writer and vectors."""
        return (entry.bytes + (WRITER_BYTES if entry.index is not None and entry.index.writing else 0)
                + (entry.vectors.nbytes if entry.vectors is not None else 0))

    def add(self, entry: IndexEntry) -> None:
        old = self.entries.pop(entry.namespace, None)
        if old is not None:
            self.total -= old.held
        entry.held = 0
        self.entries[entry.namespace] = entry
        self.recount(entry)

    def sort_by_use(self) -> None:
        self.entries = dict(sorted(self.entries.items(), key=lambda item: item[1].used))

    def touch(self, entry: IndexEntry) -> None:
        """Used now: the entry moves to the most recently used end."""
        entry.used = time.monotonic()
        self.entries[entry.namespace] = self.entries.pop(entry.namespace)

    def recount(self, entry: IndexEntry) -> None:
        """Count what ``entry`` holds now into the total, and note a writer it has open."""
        held = self.held(entry)
        self.total += held - entry.held
        entry.held = held
        if entry.index is not None and entry.index.writing:
            self.writers[entry.namespace] = None

    def hold_to_bound(self, keep: str, bound_bytes: int) -> int:
        """Close writers beyond ``MAX_OPEN_WRITERS`` (the least recently used first), then drop the
        least recently used namespaces other than ``keep`` while the total is over ``bound_bytes``."""
        if len(self.writers) > MAX_OPEN_WRITERS:
            writing = [e for e in map(self.entries.get, self.writers)
                       if e is not None and e.index is not None and e.index.writing]
            writing.sort(key=lambda e: e.used, reverse=True)
            for entry in writing[MAX_OPEN_WRITERS:]:
                assert entry.index is not None
                entry.index.release_writer()  # (staged writes are not in it: they stay searchable)
                self.recount(entry)
            self.writers = dict.fromkeys(e.namespace for e in writing[:MAX_OPEN_WRITERS])
        evicted = 0
        for namespace in list(self.entries) if self.total > bound_bytes else ():  # least recently used first
            if self.total <= bound_bytes:
                break
            if namespace != keep:
                self.drop(namespace)
                evicted += 1
        self.evictions += evicted
        return evicted

    def drop(self, namespace: str) -> None:
        """Close the namespace's index and remove its directory."""
        self.memories.forget_namespace(namespace)
        entry = self.entries.pop(namespace, None)
        self.staged.pop(namespace, None)
        self.writers.pop(namespace, None)
        if entry is None:
            return
        self.total -= entry.held
        if entry.index is not None:
            entry.index.close()
        shutil.rmtree(entry.directory, ignore_errors=True)
