"""One namespace's local index as a worker holds it: the entry, its directory and the position saved there,
and how a job's index was made ready (``Readiness``)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from ferret.errors import BackendUnavailable
from ferret.records import Memory
from ferret.worker.backends.change_log import Position
from ferret.worker.backends.tantivy_index import MemoryIndex
from ferret.worker.semantic.vectors import VectorIndex

logger = logging.getLogger(__name__)

NAME = "local"
STATE_FILE = "ferret-position.json"
SCAN_BATCH = 1000  # memories, ids or embeddings read from the store per round trip
EMPTY = Position(0, "0-0")  # the position of a namespace before its first write


class IndexNotReady(BackendUnavailable):
    """The namespace's index is being built and was not ready within the job's budget."""


@dataclass
class IndexEntry:
    namespace: str
    directory: Path
    position: Position
    bytes: int = 0
    used: float = field(default_factory=time.monotonic)
    index: MemoryIndex | None = None
    vectors: VectorIndex | None = None  # the embeddings, loaded at the first semantic search
    committed: Position | None = None  # the index's last commit (``position`` counts staged writes too)
    held: int = 0  # what it held when last counted into the total (``HeldIndexes.recount``)

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
    fold_taken: bool = False  # that commit was another worker's, taken (``shared_folds``)


FULL_BELOW_BYTES = 1 << 20  # a disk with less room than this, when tantivy's writer dies, is the cause


def out_of_space(exc: BaseException, disk: Path | None = None) -> bool:
    """Whether an error is a full disk: ENOSPC, or tantivy's IO error carrying it as text, or
    tantivy's "index writer was killed" (its IO error lost on the way) on a ``disk`` with no room."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    text = str(exc)
    if "No space left on device" in text or "os error 28" in text:
        return True
    if disk is not None and "index writer was killed" in text:
        with contextlib.suppress(OSError):
            return shutil.disk_usage(disk).free < FULL_BELOW_BYTES
    return False


def directory_bytes(directory: Path) -> int:
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file():
                    total += entry.stat().st_size
    return total


def directory_name(namespace: str) -> str:
    return sha256(namespace.encode()).hexdigest()[:24]


def save_state(entry: IndexEntry) -> None:
    """Save the position of the index's last commit (staged writes are not on disk)."""
    committed = entry.committed or entry.position
    state = {"namespace": entry.namespace, "version": committed.version, "entry": committed.entry}
    temporary = entry.directory / (STATE_FILE + ".tmp")
    temporary.write_text(json.dumps(state))
    temporary.replace(entry.directory / STATE_FILE)


def read_state(directory: Path) -> tuple[str, Position]:
    """The namespace and committed position a directory's state file saves; OSError, ValueError,
    KeyError or TypeError when there is none readable."""
    data = json.loads((directory / STATE_FILE).read_text())
    return str(data["namespace"]), Position(int(data["version"]), str(data["entry"]))


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
