"""A namespace's change log: every write to the local memory store, in order.

One Lua script changes the memories hash, bumps the namespace's version and
appends one entry to the namespace's Redis stream, so the log and the store
never disagree: entry ``v`` is the write that made version ``v``, and
versions are contiguous. Workers apply the entries after the version their
index holds, in order, each once (an entry at or below it is skipped; a
missing one, trimmed away, sends the worker back to a snapshot). The stream
keeps its last ``change_log_length`` entries (``MAXLEN ~``).

Entries are read as untrusted input: an entry that is not one of ours is
reported as a gap, never applied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from ferret import keys

OPS = ("upsert", "delete", "clear")
# Entries read per round trip while catching up.
READ_BATCH = 1000

# KEYS: memories hash, version counter, change stream, embeddings hash. An upsert's ARGV from 4 on are
# triples (id, memory JSON, embedding or ""): a memory written without one loses any it had.
_WRITE = """
local version = redis.call('INCR', KEYS[2])
local op = ARGV[1]
local changed = 0
if op == 'upsert' then
  for i = 4, #ARGV, 3 do
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    if ARGV[i + 2] == '' then
      redis.call('HDEL', KEYS[4], ARGV[i])
    else
      redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
    end
  end
  changed = (#ARGV - 3) / 3
elseif op == 'delete' then
  for i = 4, #ARGV do
    changed = changed + redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
  end
elseif op == 'clear' then
  redis.call('DEL', KEYS[1], KEYS[4])
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'v', version, 'op', op, 'ids', ARGV[3])
return {version, changed}
"""


@dataclass(frozen=True)
class Change:
    entry: str  # the stream entry id
    version: int
    op: str
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Position:
    """Where an index stands in the log: the version it holds and the entry that made it."""

    version: int
    entry: str = "0-0"


def as_text(value: Any) -> str:
    """A value read from Redis (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_entry(entry_id: Any, fields: Any) -> Change | None:
    """One stream entry as a Change, or None when it is not one of ours."""
    try:
        data = {as_text(k): as_text(v) for k, v in dict(fields).items()}
        ids = json.loads(data["ids"])
        version, op = int(data["v"]), data["op"]
    except (KeyError, ValueError, TypeError, UnicodeDecodeError):
        return None
    if op not in OPS or not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or version < 1:
        return None
    return Change(as_text(entry_id), version, op, tuple(ids))


class ChangeLog:
    """Writes (with the store) and reads one namespace's changes."""

    def __init__(self, client: redis.Redis, namespace: str, length: int = 10_000) -> None:
        self.client = client
        self.namespace = namespace
        self.length = length
        self._write = client.register_script(_WRITE)

    def write(self, op: str, ids: list[str], values: list[str] | None = None,
              embeddings: list[bytes] | None = None) -> tuple[int, int]:
        """Apply one write to the store and log it; (new version, memories changed).
        ``embeddings``: each upserted memory's, kept with it (none: it has none)."""
        args: list[Any] = [op, self.length, json.dumps(ids)]
        if op == "upsert":
            vectors = embeddings if embeddings is not None else [b""] * len(ids)
            for memory_id, value, vector in zip(ids, values or [], vectors, strict=True):
                args += [memory_id, value, vector]
        elif op == "delete":
            args += ids
        keys_ = [keys.memories(self.namespace), keys.memory_version(self.namespace), keys.changes(self.namespace),
                 keys.embeddings(self.namespace)]
        version, changed = self._write(keys=keys_, args=args)
        return int(version), int(changed)

    def position(self) -> Position:
        """The store's version and the last entry, read together."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(keys.memory_version(self.namespace))
            pipe.xrevrange(keys.changes(self.namespace), count=1)
            version, last = pipe.execute()
        return Position(int(version or 0), as_text(last[0][0]) if last else "0-0")

    def after(self, position: Position, count: int = READ_BATCH) -> tuple[int, list[Change | None]]:
        """The store's version now and up to ``count`` entries after ``position``'s entry."""
        with self.client.pipeline(transaction=False) as pipe:
            pipe.get(keys.memory_version(self.namespace))
            pipe.xrange(keys.changes(self.namespace), min=position.entry, count=count + 1)
            version, entries = pipe.execute()
        changes = [parse_entry(entry_id, fields) for entry_id, fields in entries
                   if as_text(entry_id) != position.entry]
        return int(version or 0), changes[:count]
