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

With ``replicas`` > 0 a write is acknowledged only once that many replicas
of the server holding the namespace have it: the script and a ``WAIT`` go
down one connection to that server (on a Redis Cluster, the primary of the
namespace's slot), so the wait covers exactly this write. Too few in time:
``WriteNotReplicated`` (the write is applied; writing it again is safe).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import AskError, ClusterDownError, MovedError, NoScriptError, ReadOnlyError, TryAgainError

from ferret import keys
from ferret.errors import BackendUnavailable, WriteNotReplicated
from ferret.redis_plumbing.scripts import SlotScript, registered
from ferret.redis_plumbing.store_conn import is_cluster, node_for, refresh_topology
from ferret.steps import Eval, Step

OPS = ("upsert", "delete", "clear")
# What a write sent to a shard's primary meets during a failover.
_MOVED = (redis.ConnectionError, redis.TimeoutError, MovedError, AskError, ClusterDownError, TryAgainError,
          ReadOnlyError)
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


# KEYS: version counter, change stream, memories hash. ARGV: the entry to read from (the caller skips it),
# how many entries, the most ids whose memories come along. The version, the entries, and the ids the
# entries name (an entry's ``ids`` that is not a JSON list gives none: the caller says what is wrong) with
# their stored values; no ids when there are more than the most.
_AFTER = """
local version = redis.call('GET', KEYS[1])
local entries = redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])
local ids, seen = {}, {}
for _, entry in ipairs(entries) do
  local fields = entry[2]
  for i = 1, #fields - 1, 2 do
    if entry[1] ~= ARGV[1] and fields[i] == 'ids' then
      local ok, named = pcall(cjson.decode, fields[i + 1])
      if ok and type(named) == 'table' then
        for _, id in ipairs(named) do
          if type(id) == 'string' and not seen[id] then
            seen[id] = true
            table.insert(ids, id)
          end
        end
      end
    end
  end
end
if #ids == 0 or #ids > tonumber(ARGV[3]) then return {version, entries, {}, {}} end
return {version, entries, ids, redis.call('HMGET', KEYS[3], unpack(ids))}
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


def _pairs(fields: Any) -> dict[Any, Any]:
    """A stream entry's fields as a script reads them (a flat list) as a mapping; anything else as it is."""
    if isinstance(fields, list):
        return dict(zip(fields[::2], fields[1::2], strict=False))
    return fields  # type: ignore[no-any-return]


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


def write_call(namespace: str, length: int, op: str, ids: list[str], values: list[str] | None = None,
               embeddings: list[bytes] | None = None) -> tuple[list[str], list[Any]]:
    """The keys and arguments of ``_WRITE`` for one write of ``namespace`` (its log kept to ``length``)."""
    args: list[Any] = [op, length, json.dumps(ids)]
    if op == "upsert":
        vectors = embeddings if embeddings is not None else [b""] * len(ids)
        for memory_id, value, vector in zip(ids, values or [], vectors, strict=True):
            args += [memory_id, value, vector]
    elif op == "delete":
        args += ids
    return [keys.memories(namespace), keys.memory_version(namespace), keys.changes(namespace),
            keys.embeddings(namespace)], args


def write_step(namespace: str, length: int, op: str, ids: list[str],
               values: list[str] | None = None) -> Step[tuple[int, int]]:
    """One write with no embeddings and no replicas to wait for, as a ``ferret.steps`` rule on the memory
    store: a client that runs rules writes without a thread (the asyncio client's ``remember``)."""
    keys_, args = write_call(namespace, length, op, ids, values)
    version, changed = yield Eval(_WRITE, tuple(keys_), tuple(args), on="store")
    return int(version), int(changed)


class ChangeLog:
    """Writes (with the store) and reads one namespace's changes."""

    def __init__(self, client: redis.Redis, namespace: str, length: int = 10_000, replicas: int = 0,
                 replica_timeout_ms: int = 1000) -> None:
        self.client = client
        self.namespace = namespace
        self.length = length
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms

    @property
    def _write(self) -> Script | SlotScript:
        return registered(self.client, _WRITE)

    @property
    def _after(self) -> Script | SlotScript:
        return registered(self.client, _AFTER)

    def write(self, op: str, ids: list[str], values: list[str] | None = None,
              embeddings: list[bytes] | None = None) -> tuple[int, int]:
        """Apply one write to the store and log it; (new version, memories changed).
        ``embeddings``: each upserted memory's, kept with it (none: it has none)."""
        keys_, args = write_call(self.namespace, self.length, op, ids, values, embeddings)
        if self.replicas <= 0:
            version, changed = self._write(keys=keys_, args=args)
            return int(version), int(changed)
        return self._write_replicated(keys_, args)

    def _write_replicated(self, keys_: list[str], args: list[Any]) -> tuple[int, int]:
        """The script then ``WAIT``, on one connection to the namespace's primary.
        On a cluster, an error that says the slot moved (a failover) refreshes the
        topology and the write is tried once more."""
        for attempt in (1, 2):
            node = node_for(self.client, keys_[0])
            try:
                try:
                    (version, changed), acked = self._send(node, keys_, args)
                except NoScriptError:
                    node.script_load(_WRITE)
                    (version, changed), acked = self._send(node, keys_, args)
                break
            except _MOVED as exc:
                if not is_cluster(self.client):
                    raise
                if attempt == 2:
                    raise BackendUnavailable("local", f"the store's shard for namespace {self.namespace!r} "
                                                      f"is not answering (a failover?): {exc}") from exc
                refresh_topology(self.client)
        if int(acked) < self.replicas:
            raise WriteNotReplicated("local", f"namespace {self.namespace!r}: the write (version {version}) "
                                              f"reached {acked} of {self.replicas} replicas within "
                                              f"{self.replica_timeout_ms} ms; write it again")
        return int(version), int(changed)

    def _send(self, node: redis.Redis, keys_: list[str], args: list[Any]) -> tuple[list[Any], int]:
        with node.pipeline(transaction=False) as pipe:
            pipe.evalsha(self._write.sha, len(keys_), *keys_, *args)
            pipe.wait(self.replicas, self.replica_timeout_ms)
            written, acked = pipe.execute()
        return written, int(acked)

    def position(self) -> Position:
        """The store's version and the last entry, read together."""
        with self.client.pipeline(transaction=True) as pipe:
            pipe.get(keys.memory_version(self.namespace))
            pipe.xrevrange(keys.changes(self.namespace), count=1)
            version, last = pipe.execute()
        return Position(int(version or 0), as_text(last[0][0]) if last else "0-0")

    def after(self, position: Position, count: int = READ_BATCH) -> tuple[int, list[Change | None], dict[str, Any]]:
        """The store's version now, up to ``count`` entries after ``position``'s entry, and the stored value of
        each memory they name (None: none stored), read with them in one round trip (``_AFTER``); no values
        when they name more than ``READ_BATCH`` ids (the caller reads those in batches)."""
        version, entries, ids, values = self._after(
            keys=[keys.memory_version(self.namespace), keys.changes(self.namespace), keys.memories(self.namespace)],
            args=[position.entry, count + 1, READ_BATCH])
        changes = [parse_entry(entry_id, _pairs(fields)) for entry_id, fields in entries
                   if as_text(entry_id) != position.entry]
        return int(version or 0), changes[:count], dict(zip((as_text(i) for i in ids), values, strict=True))
