"""A job's put in one round trip: RQ's enqueue commands run by one Lua script, with what has to
happen at the same moment riding in it.

RQ's enqueue is a MULTI/EXEC of a few commands (``EnqueueCommands``). A prefetch needed four round
trips around it: claiming the in-flight slot of its twin check before it, then reading its
conversation's earlier prefetches and pushing its own entry after it. The script does them all,
atomically:

- ``claim``: the in-flight slot is set (NX, with its TTL) first; when another prefetch holds it,
  nothing is enqueued and the script answers ``0`` (the caller looks at the holder, as before);
- the job's commands, in order, exactly as RQ would send them in its transaction;
- ``conversation``: the conversation's entries are read, the job's own entry pushed (the list trimmed
  and its TTL renewed), and the earlier entries whose job is still on the prefetch queue are returned:
  only those can be superseded, so a prefetch whose predecessor has run (an agent's usual turn) needs
  no further round trip.

The keys the script touches are all passed as keys (each command's first argument is its key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferret.steps import Eval, Step

# KEYS: each command's key, then the slot (when claiming), then the conversation's list and the prefetch
# queue (when pushing an entry). ARGV: the number of commands, the claim flag, the slot's value and TTL
# (ms), the conversation flag, the entry, the list's TTL and length, then per command: its name, its
# count of arguments after the key, those arguments.
_PUT = """
local n = tonumber(ARGV[1])
local k = n + 1
if ARGV[2] == '1' then
  if not redis.call('SET', KEYS[k], ARGV[3], 'NX', 'PX', ARGV[4]) then return {0} end
  k = k + 1
end
local a = 9
for c = 1, n do
  local count = tonumber(ARGV[a + 1])
  redis.call(ARGV[a], KEYS[c], unpack(ARGV, a + 2, a + 1 + count))
  a = a + 2 + count
end
if ARGV[5] ~= '1' then return {1} end
local list, queue = KEYS[k], KEYS[k + 1]
local older = redis.call('LRANGE', list, 0, -1)
redis.call('LPUSH', list, ARGV[6])
redis.call('LTRIM', list, 0, tonumber(ARGV[8]) - 1)
redis.call('EXPIRE', list, ARGV[7])
local queued = {}
for _, entry in ipairs(older) do
  local id = string.match(entry, '^(%S+) ')
  if id and redis.call('LPOS', queue, id) then table.insert(queued, entry) end
end
return {1, queued}
"""


@dataclass(frozen=True)
class Claim:
    """The in-flight slot of a prefetch's twin check: set NX before the job is put."""

    key: str
    value: str
    ttl_ms: int


@dataclass(frozen=True)
class ConversationPush:
    """A conversation's entry pushed with the job (its list kept to ``kept`` entries for ``ttl`` seconds);
    the earlier entries still on ``queue`` come back."""

    key: str
    entry: str
    ttl: int
    kept: int
    queue: str


@dataclass(frozen=True)
class Put:
    """What the script did: ``put`` False when the slot was held (nothing enqueued); ``queued``: the
    conversation's earlier entries whose job is still on the queue (None when no entry was pushed)."""

    put: bool
    queued: list[bytes] | None


def put_job(commands: tuple[tuple[Any, ...], ...], claim: Claim | None = None,
            conversation: ConversationPush | None = None) -> Step[Put]:
    keys: list[Any] = [command[1] for command in commands]
    args: list[Any] = [len(commands)]
    if claim is not None:
        keys.append(claim.key)
        args += ["1", claim.value, claim.ttl_ms]
    else:
        args += ["0", "", 0]
    if conversation is not None:
        keys += [conversation.key, conversation.queue]
        args += ["1", conversation.entry, conversation.ttl, conversation.kept]
    else:
        args += ["0", "", 0, 0]
    for name, _key, *rest in commands:
        args += [name, len(rest), *rest]
    reply = yield Eval(_PUT, tuple(keys), tuple(args))
    if not int(reply[0]):
        return Put(False, None)
    return Put(True, list(reply[1]) if len(reply) > 1 else None)
