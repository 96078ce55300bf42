"""A namespace's index taken from another worker on this host instead of built: ``PeerIndexes``.

Every worker process keeps its index directories under a root of its own, the roots of one host side by
side under one base (``local.default_index_root``: ``/dev/shm`` by default). Each worker used to build
each namespace it served: with two workers on a host, an agent's namespace of 100 memories was read,
tokenised and committed twice (~12 ms of CPU each time), and in ``ferret bench agents`` (100 agents of
10 turns) those first builds were about a third of a turn's job in the workers.

Before building a namespace, a worker now looks for a copy another live worker of the same memory store
has committed on this host, and takes it by hard links (no bytes copied):

- tantivy never rewrites a file it has written: a commit writes new segment files and replaces
  ``meta.json`` (and its list of managed files) by a rename, so a link keeps the version it was made to,
  whatever the peer does next, and what this worker writes later replaces its own links, never the peer's;
- the peer's state file (the change-log position of its last commit) is read *before* the files are
  linked, and the peer saves it *after* committing: the files are at that position or newer, and the
  change log applied from that position brings the copy up to date (applying a change the files already
  hold again is harmless: an upsert replaces the memory, a delete of one that is gone does nothing);
- anything out of place (the peer dropped a file between the listing and the link, evicted the whole
  directory, holds only staged writes, a file does not open) ends the attempt: the directory is removed
  and the worker builds, as before;
- only the roots of live workers (the process id in the root's name), of this host, of this user (the base
  directory is every user's to write in), and of the same memory store (each root names its store's
  identity in ``STORE_FILE``) are looked at: a worker of another store, with namespaces of the same names,
  is never a peer, and nothing another user planted is taken. A symbolic link is never followed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from ferret.redis_plumbing.pids import pid_alive
from ferret.worker.backends.change_log import Position
from ferret.worker.backends.index_entry import EMPTY, STATE_FILE, directory_name, read_state
from ferret.worker.backends.tantivy_index import MemoryIndex

logger = logging.getLogger(__name__)

STORE_FILE = "ferret-store.txt"  # in a worker's root: the identity of the memory store its indexes hold
_TANTIVY_LOCKS = (".tantivy-writer.lock", ".tantivy-meta.lock")
_FIRST = ("meta.json", ".managed.json")  # linked first: they name the segment files linked after them


class PeerIndexes:
    """The committed indexes of this host's other workers of the same store, taken by hard links."""

    def __init__(self, root: Path, store_identity: Callable[[], str]) -> None:
        """``root``: this worker's root, named ``<prefix>-<host>-<pid>-<suffix>`` like its peers' (a root
        named otherwise has no peers); ``store_identity``: the memory store's identity (read once, when
        first needed)."""
        self.root = root
        parts = root.name.rsplit("-", 2)
        self.host_prefix = parts[0] + "-" if len(parts) == 3 and parts[1].isdigit() else None
        self._store_identity = store_identity
        self._identity: str | None = None
        self.taken = 0  # namespaces taken from a peer
        self.failed = 0  # attempts that found a peer's copy and could not take it
        self.folds_taken = 0  # folds a peer had made, taken instead of made here (``shared_folds``)

    def identity(self) -> str:
        """The store's identity, written into this worker's root for its peers (once)."""
        if self._identity is None:
            identity = self._store_identity()
            self.root.mkdir(parents=True, exist_ok=True)
            temporary = self.root / (STORE_FILE + ".tmp")
            temporary.write_text(identity)
            temporary.replace(self.root / STORE_FILE)
            self._identity = identity
        return self._identity

    def peers(self) -> Iterator[Path]:
        """The roots of this host's other live workers of the same store."""
        if self.host_prefix is None:
            return
        identity = self.identity()
        with contextlib.suppress(OSError):
            for root in self.root.parent.glob(self.host_prefix + "*"):
                parts = root.name.rsplit("-", 2)
                if root == self.root or len(parts) != 3 or parts[0] + "-" != self.host_prefix \
                        or not parts[1].isdigit() or not pid_alive(int(parts[1])) or not _own_directory(root):
                    continue
                try:
                    if (root / STORE_FILE).read_text() != identity:
                        continue
                except OSError:
                    continue
                yield root

    def commits(self, namespace: str) -> Iterator[tuple[Path, Position]]:
        """The peers' committed copies of ``namespace``: each directory, with the position its state file
        saves (read before any of its files is linked: the files are at that position or newer)."""
        name = directory_name(namespace)
        for root in self.peers():
            source = root / name
            if not _own_directory(source):
                continue  # none there, or not this user's: nothing in it is read
            try:
                found, position = read_state(source)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # being made
            if found != namespace or position == EMPTY:
                continue  # staged writes only: nothing committed to take
            yield source, position

    def newest_commit(self, namespace: str, newer_than: int, at_most: int) -> tuple[Path, Position] | None:
        """The peers' newest committed copy of ``namespace`` past version ``newer_than`` and at most at
        ``at_most``, if any."""
        return max((found for found in self.commits(namespace) if newer_than < found[1].version <= at_most),
                   key=lambda found: found[1].version, default=None)

    def take(self, namespace: str, directory: Path) -> tuple[MemoryIndex, Position] | None:
        """A peer's committed index of ``namespace`` linked into ``directory`` (empty, made by the caller),
        open, with the position to catch up from; None when no peer has one to give (``directory`` is then
        empty again)."""
        for source, position in self.commits(namespace):
            try:
                link_files(source, directory)
                index = MemoryIndex(str(directory))
                if len(index) == 0:
                    raise ValueError("no committed memories in the linked copy")
            except (OSError, ValueError) as exc:
                self.failed += 1
                logger.info("namespace=%s the copy of worker root %s could not be taken (%s); building",
                            namespace, source.parent.name, exc)
                _empty(directory)
                continue
            self.taken += 1
            return index, position
        return None


def _own_directory(path: Path) -> bool:
    """A directory of this process's user (the base, ``/dev/shm`` by default, is every user's to write in:
    another user's files are never taken)."""
    try:
        info = path.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def link_files(source: Path, directory: Path) -> None:
    """Hard links in ``directory`` to ``source``'s index files: the ones that name the others first."""
    for name in _FIRST:
        with contextlib.suppress(FileNotFoundError):  # .managed.json: absent until a first garbage collection
            os.link(source / name, directory / name, follow_symlinks=False)
    for entry in os.scandir(source):
        name = entry.name
        if name in _FIRST or name in _TANTIVY_LOCKS or name.startswith(STATE_FILE) \
                or not entry.is_file(follow_symlinks=False):
            continue
        os.link(entry.path, directory / name, follow_symlinks=False)


def _empty(directory: Path) -> None:
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
