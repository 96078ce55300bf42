"""A fold another worker on this host has made already, taken instead of made again: ``take_peers_fold``.

Every worker follows a namespace's change log into its own copy of the index and folds the staged writes
into it once ``fold_changes`` of them wait (``index_registry``). With two workers on a host, each write was
committed twice: a tantivy commit of ~8-17 ms of CPU per 32 writes in each worker, and every seventh
commit a merge that rewrites the whole index of a namespace under ~16,800 memories (tantivy's default
merge policy; 70-95 ms at 10,000 memories), in each worker again. On an agent's namespace of 10,000
memories that was most of what a write cost the workers.

So, before committing its staged writes, a worker looks for a newer commit of the namespace in the root of
another live worker of the same store on this host (``index_sharing.PeerIndexes``). When one holds all but
a few of its staged writes, the worker links that copy's files (hard links: no bytes copied, and tantivy
never rewrites a file it has written), opens it in place of its own, and stages again only the changes
after it from the change log (``index_catch_up``): ~1-3 ms of CPU instead of the commit and its share of
the merges. The copy is linked beside the worker's own directory and put in its place by two renames once
every file is linked, so a copy the peer changes meanwhile (a merge that removes a file) is given up
without touching the worker's index, which then folds its writes itself as before. A crash between the
two renames leaves a directory that ``ColdStart.adopt_directories`` removes and a namespace that is
opened afresh.

The index it takes holds what its own fold would have committed (the same memories at the same change-log
position), plus the changes it stages again, applied once each in order; a change the copy already holds
applied again is harmless (an upsert replaces the memory, a delete of one that is gone does nothing). Its
BM25 statistics are the peer's: tantivy counts a deleted document until a merge removes it, so two
workers that commit at different times can rank near-ties differently, and a worker that takes a peer's
commit ranks them as the peer does.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import redis

from ferret.worker.backends.held_memories import HeldMemories
from ferret.worker.backends.index_catch_up import catch_up
from ferret.worker.backends.index_entry import IndexEntry, save_state
from ferret.worker.backends.index_sharing import PeerIndexes, link_files
from ferret.worker.backends.tantivy_index import MemoryIndex

logger = logging.getLogger(__name__)

INCOMING = ".incoming"  # a peer's copy being linked, beside the directory it will replace
OUTGOING = ".outgoing"  # the directory it replaced, until removed


def take_peers_fold(peers: PeerIndexes, client: redis.Redis, entry: IndexEntry, held: HeldMemories,
                    fold_changes: int) -> bool:
    """Replace the entry's index by a peer's newer commit and stage again the changes after it; True when
    taken, False when the caller is to fold its staged writes itself (no peer's commit covers all but
    fewer than half of ``fold_changes`` of them, or it could not be taken). A commit past what this worker
    has read is not taken: the changes between would reach its index but not the memories it holds for
    hits or its vectors. ``catch_up``'s ``Gap`` (the change log no longer covers the copy) is raised with
    the index already replaced."""
    assert entry.index is not None and entry.committed is not None
    try:
        found = peers.newest_commit(entry.namespace, newer_than=entry.committed.version,
                                    at_most=entry.position.version)
    except (OSError, redis.RedisError) as exc:  # the peers' roots unreadable, the store's identity
        logger.info("namespace=%s no peer's commit looked at (%s)", entry.namespace, exc)
        return False
    if found is None or found[1].version < entry.position.version - fold_changes // 2:
        return False  # none newer, or one that leaves most of the writes to stage again
    source, position = found
    incoming = _beside(entry.directory, INCOMING)
    shutil.rmtree(incoming, ignore_errors=True)
    try:
        incoming.mkdir()
        link_files(source, incoming)
        index = _swapped_in(incoming, entry.directory)
    except (OSError, ValueError) as exc:  # the peer removed a file meanwhile (a merge, an eviction): fold here
        logger.info("namespace=%s the commit of worker root %s could not be taken (%s); folding here",
                    entry.namespace, source.parent.name, exc)
        shutil.rmtree(incoming, ignore_errors=True)
        peers.failed += 1
        return False
    entry.index.close()
    entry.index = index
    entry.position = entry.committed = position
    save_state(entry)
    peers.folds_taken += 1
    catch_up(client, entry, held)
    return True


def _swapped_in(incoming: Path, directory: Path) -> MemoryIndex:
    """``incoming`` in ``directory``'s place, opened; on failure ``directory`` is put back as it was (its
    open index, which reads its files by their inodes, never noticed) and the error raised."""
    outgoing = _beside(directory, OUTGOING)
    shutil.rmtree(outgoing, ignore_errors=True)
    os.rename(directory, outgoing)
    try:
        os.rename(incoming, directory)
        index = MemoryIndex(str(directory))
    except (OSError, ValueError):
        if not outgoing.exists():
            raise
        if directory.exists():
            os.rename(directory, incoming)
        os.rename(outgoing, directory)
        raise
    shutil.rmtree(outgoing, ignore_errors=True)
    return index


def _beside(directory: Path, suffix: str) -> Path:
    """A name in the same root that ``ColdStart.adopt_directories`` removes if a crash leaves it."""
    return directory.with_name("." + directory.name + suffix)
