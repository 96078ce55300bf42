"""Prebuilt index snapshots in Redis, where every worker on every machine can read them.

A snapshot is the files of a committed tantivy index directory, stored as
chunks (``CHUNK_BYTES`` each) under a fresh generation id, and a manifest
naming the generation, its files and sizes, the change-log position the
index holds and how many memories it has. The manifest is written last, so a
reader sees a whole snapshot or the previous one; the chunks of a replaced
generation expire after ``OLD_GENERATION_TTL`` seconds (a reader midway
through them still finishes).

The manifest and chunks come from Redis, so they are untrusted: file names
must be plain names, sizes must add up, a chunk or manifest larger than
one of ours is not read past that size, and anything else means "no
snapshot" (the index is then built from the memories instead).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from ferret import keys
from ferret.worker.backends.change_log import Position

logger = logging.getLogger(__name__)

CHUNK_BYTES = 4 * 1024 * 1024
OLD_GENERATION_TTL = 600
MAX_SNAPSHOT_BYTES = 8 * 1024**3
MAX_MANIFEST_BYTES = 1024 * 1024  # a manifest names a few dozen files
_FILE_NAME = re.compile(r"\.?[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # tantivy's files, ".managed.json" included
_SKIPPED = {".tantivy-writer.lock", ".tantivy-meta.lock", "ferret-position.json"}


@dataclass(frozen=True)
class Manifest:
    generation: str
    position: Position
    memories: int
    files: tuple[tuple[str, int], ...]
    chunks: int

    @property
    def size(self) -> int:
        return sum(size for _, size in self.files)


def _parse(raw: bytes | str | None) -> Manifest | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        files = tuple((str(name), int(size)) for name, size in data["files"])
        manifest = Manifest(str(data["generation"]), Position(int(data["version"]), str(data["entry"])),
                            int(data["memories"]), files, int(data["chunks"]))
    except (ValueError, TypeError, KeyError):
        logger.warning("index snapshot manifest unreadable; ignored")
        return None
    sane = (re.fullmatch(r"[0-9a-f]{32}", manifest.generation) and manifest.chunks >= 0
            and all(_FILE_NAME.fullmatch(name) and size >= 0 for name, size in files)
            and len({name for name, _ in files}) == len(files) and 0 <= manifest.size <= MAX_SNAPSHOT_BYTES
            and manifest.chunks == -(-manifest.size // CHUNK_BYTES))
    if not sane:
        logger.warning("index snapshot manifest malformed; ignored")
        return None
    return manifest


def read_manifest(client: redis.Redis, namespace: str) -> Manifest | None:
    try:
        raw = client.getrange(keys.index_snapshot(namespace), 0, MAX_MANIFEST_BYTES)
    except redis.ResponseError:  # WRONGTYPE: not a manifest of ours
        logger.warning("index snapshot manifest of %r is not a string; ignored", namespace)
        return None
    if len(raw) > MAX_MANIFEST_BYTES:
        logger.warning("index snapshot manifest of %r is larger than any manifest; ignored", namespace)
        return None
    return _parse(raw or None)


def save(client: redis.Redis, namespace: str, directory: Path, position: Position, memories: int) -> Manifest:
    """Store the committed index in ``directory`` as the namespace's snapshot."""
    names = sorted(n for n in os.listdir(directory) if n not in _SKIPPED and (directory / n).is_file())
    files = tuple((name, (directory / name).stat().st_size) for name in names)
    generation = uuid.uuid4().hex
    number = 0
    for chunk in _file_chunks(directory, [name for name, _ in files]):
        client.set(keys.index_snapshot_chunk(namespace, generation, number), chunk)
        number += 1
    manifest = Manifest(generation, position, memories, files, number)
    previous = read_manifest(client, namespace)
    client.set(keys.index_snapshot(namespace), json.dumps({
        "generation": generation, "version": position.version, "entry": position.entry,
        "memories": memories, "files": [list(f) for f in files], "chunks": number}))
    if previous is not None and previous.generation != generation:
        with client.pipeline(transaction=False) as pipe:
            for old in range(previous.chunks):
                pipe.expire(keys.index_snapshot_chunk(namespace, previous.generation, old), OLD_GENERATION_TTL)
            pipe.execute()
    return manifest


def _file_chunks(directory: Path, names: list[str]) -> Iterator[bytes]:
    """The files' bytes, concatenated, in chunks of CHUNK_BYTES, read a chunk at a time."""
    pending = bytearray()
    for name in names:
        with open(directory / name, "rb") as source:
            while piece := source.read(CHUNK_BYTES - len(pending)):
                pending += piece
                if len(pending) == CHUNK_BYTES:
                    yield bytes(pending)
                    pending.clear()
    if pending:
        yield bytes(pending)


def load(client: redis.Redis, namespace: str, manifest: Manifest, directory: Path) -> bool:
    """Write the snapshot's files into the empty ``directory``; False if it is incomplete."""
    stream = _chunks(client, namespace, manifest)
    buffer = bytearray()
    for name, size in manifest.files:
        with open(directory / name, "wb") as out:
            left = size
            while left:
                if not buffer:
                    chunk = next(stream, None)
                    if chunk is None:
                        return False
                    buffer += chunk
                piece = buffer[:left]
                out.write(piece)
                del buffer[:len(piece)]
                left -= len(piece)
    return not buffer and next(stream, None) is None


def _chunks(client: redis.Redis, namespace: str, manifest: Manifest) -> Iterator[bytes]:
    for number in range(manifest.chunks):
        try:  # at most one chunk's bytes: a larger value is not one of ours
            chunk = client.getrange(keys.index_snapshot_chunk(namespace, manifest.generation, number), 0, CHUNK_BYTES)
        except redis.ResponseError:  # WRONGTYPE
            return
        if not isinstance(chunk, bytes) or not chunk or len(chunk) > CHUNK_BYTES:  # missing, or not ours
            return
        yield chunk
