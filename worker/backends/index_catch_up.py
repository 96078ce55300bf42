"""Following a namespace's change log: the entries after an index's version applied in order, each once,
staged (searchable at once, committed later); a gap (the log no longer holds them, or the store went back)
is said so the index is loaded afresh."""

from __future__ import annotations

import logging
from typing import Any

import redis

from ferret import keys
from ferret.records import Memory
from ferret.worker.backends.change_log import READ_BATCH, ChangeLog, Position
from ferret.worker.backends.held_memories import HeldMemories
from ferret.worker.backends.index_entry import SCAN_BATCH, IndexEntry, parse_memories
from ferret.worker.backends.index_vectors import upsert_vectors
from ferret.worker.semantic.vectors import VectorIndex

logger = logging.getLogger(__name__)


class Gap(Exception):
    """The change log no longer holds the entries after the index's version."""


def catch_up(client: redis.Redis, entry: IndexEntry, held: HeldMemories) -> int:
    """Apply every change after the entry's version, in order, each once; the number applied.
    Entries that are not ours are skipped: versions must still follow on, else it is a gap.
    A store that went back (a failover lost writes this index applied: the store's version
    is below the index's, or entries after the index's one reuse its versions) is a gap too."""
    assert entry.index is not None
    log = ChangeLog(client, entry.namespace)
    applied = 0
    while True:
        version, changes, stored = log.after(entry.position)
        rewritten = any(c is not None and c.version <= entry.position.version for c in changes)
        if version < entry.position.version or rewritten:
            logger.warning("namespace=%s the store is behind this index (a failover lost writes it "
                           "applied)", entry.namespace)
            raise Gap()
        if version == entry.position.version:
            break
        run = []
        expected = entry.position.version + 1
        for change in changes:
            if change is None:
                logger.warning("namespace=%s change-log entry not ours; skipped", entry.namespace)
                continue
            if change.version != expected:
                raise Gap()
            run.append(change)
            expected += 1
        if not run:
            raise Gap()
        apply_changes(client, entry, run, held, stored)
        applied += len(run)
        if len(changes) < READ_BATCH and entry.position.version >= version:
            break  # the read held the log's end, and every write that had counted itself is applied
    return applied


def apply_changes(client: redis.Redis, entry: IndexEntry, changes: list, held: HeldMemories,
                  stored: dict[str, Any] | None = None) -> None:
    """Stage one run of changes: the memories they name read afresh (gone ones deleted); ``stored``: the
    values read with the changes (``ChangeLog.after``), else they are read here."""
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
    if stored is not None and all(memory_id in stored for memory_id in ids):
        upserts, deletes = parse_memories([stored[memory_id] for memory_id in ids], ids)
    else:
        for start in range(0, len(ids), SCAN_BATCH):
            part = ids[start:start + SCAN_BATCH]
            found, missing = parse_memories(client.hmget(keys.memories(entry.namespace), part), part)
            upserts += found
            deletes += missing
    entry.index.stage(upserts=upserts, deletes=deletes, clear=clear)
    if clear:
        held.forget_namespace(entry.namespace)
    held.forget(entry.namespace, deletes)
    held.put(entry.namespace, upserts)
    if entry.vectors is not None:
        if clear:
            entry.vectors = VectorIndex()
        entry.vectors.delete(deletes)
        written = [m.id for m in upserts]
        for start in range(0, len(written), SCAN_BATCH):
            part = written[start:start + SCAN_BATCH]
            upsert_vectors(entry.vectors, entry.namespace, part, client.hmget(keys.embeddings(entry.namespace), part))
    last = changes[-1]
    entry.position = Position(last.version, last.entry)
