"""Conversation-level prefetch: the freshest context for a conversation.

An agent prefetches context for its next turn in the background. When the
next turn comes before the previous prefetch ran, that prefetch is wasted
work in front of the one that matters: ``prefetch`` enqueues the new job,
pushing its entry on the conversation's list in the same round trip
(``ferret.producer.put_script``), and when an older prefetch of the
conversation is still on the queue, one Lua script takes each off it and
gives it its final result: status
``expired`` (it was not run, as a job whose deadline passed in the queue;
no new status for clients to learn), ``stats.superseded_by`` naming the
newer job, and an error saying so. An older prefetch a worker has already
taken runs to its end; the newer one still runs.

The conversation's prefetches are a short list in Redis (newest first, job
id and the namespace's memory version when it was enqueued), kept as long
as results are. ``context_for`` returns the newest one that has a result
(superseded ones aside), how old it is on Redis's clock, and whether
memories were written since it was enqueued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ferret import keys
from ferret.contract import RetrievalResult, Timestamps
from ferret.envelope import JobEnvelope
from ferret.errors import InvalidRequest
from ferret.producer.put_script import ConversationPush
from ferret.results import READ_CAP_BYTES, parse_result, stored_result
from ferret.rq_layer.producer_side import PREFETCH_QUEUE_KEY, job_key
from ferret.stats import JobStats
from ferret.steps import Call, Eval, Now, Step, text

if TYPE_CHECKING:
    from ferret.producer.rules import JobHandle, ProducerRules

KEPT = 5  # prefetches remembered per conversation

# KEYS: the conversation's list, the prefetch queue, the counter, then per older entry: its
# result, done and RQ job keys. ARGV: the new entry, the list's TTL, KEPT, whether to push the
# entry (not when the put pushed it), then per older entry: its id, its packed superseded result
# and that result's TTL.
_SUPERSEDE = """
if ARGV[4] == '1' then
  redis.call('LPUSH', KEYS[1], ARGV[1])
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[3]) - 1)
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
local superseded = {}
local older = (#KEYS - 3) / 3
for i = 0, older - 1 do
  local id = ARGV[5 + 3 * i]
  if redis.call('LREM', KEYS[2], 0, id) > 0 then
    local result, done, job = KEYS[4 + 3 * i], KEYS[5 + 3 * i], KEYS[6 + 3 * i]
    if redis.call('SET', result, ARGV[6 + 3 * i], 'NX', 'EX', ARGV[7 + 3 * i]) then
      redis.call('DEL', done)
      redis.call('RPUSH', done, '1')
      redis.call('EXPIRE', done, ARGV[7 + 3 * i])
      redis.call('PUBLISH', done, '1')
    end
    redis.call('DEL', job)
    redis.call('INCR', KEYS[3])
    table.insert(superseded, id)
  end
end
return superseded
"""


# KEYS: the conversation's list. ARGV: the result keys' prefix, the read cap. The list, and the newest
# entry's job id with its stored result (GETRANGE, as ``read_result``; false when there is none) unless
# that key holds another type: the usual read in one round trip (any other entry, and a key of another
# type, are read as before, which says what is wrong). The queue Redis is never a cluster, so the script
# may name the result's key itself.
_NEWEST = """
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
local id = entries[1] and string.match(entries[1], '^(%S+) ')
if not id then return {entries} end
local kind = redis.call('TYPE', ARGV[1] .. id)['ok']
if kind == 'none' then return {entries, id, false} end
if kind ~= 'string' then return {entries} end
return {entries, id, redis.call('GETRANGE', ARGV[1] .. id, 0, ARGV[2])}
"""


@dataclass(frozen=True)
class ConversationContext:
    """The freshest finished prefetch of a conversation."""

    result: RetrievalResult
    age_seconds: float  # since it finished, on Redis's clock
    memory_version: int  # the namespace's version when it was enqueued
    current_version: int  # the namespace's version now
    newer_pending: bool  # a newer prefetch of the conversation has no result yet

    @property
    def stale(self) -> bool:
        """Memories were written (or deleted) since it was enqueued."""
        return self.current_version != self.memory_version

    @property
    def context(self) -> str:
        return self.result.context


def conversation_key(namespace: str, conversation: str, max_chars: int) -> str:
    if not isinstance(conversation, str) or not conversation.strip():
        raise InvalidRequest("conversation", "must be a non-empty string")
    if len(conversation) > max_chars:
        raise InvalidRequest("conversation", f"is longer than {max_chars} characters")
    return keys.conversation(namespace, conversation)


@dataclass(frozen=True)
class _Entry:
    """One prefetch in a conversation's list: ``job_id version enqueued_at deadline_at coalesced``."""

    job_id: str
    version: int
    enqueued_at: float
    deadline_at: float
    coalesced: bool  # joined another request's job: never superseded from here

    def __str__(self) -> str:
        return f"{self.job_id} {self.version} {self.enqueued_at:.6f} {self.deadline_at:.6f} {int(self.coalesced)}"

    @classmethod
    def parse(cls, raw: bytes | str) -> _Entry | None:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        try:
            job_id, version, enqueued_at, deadline_at, coalesced = text.split(" ")
            return cls(job_id, int(version), float(enqueued_at), float(deadline_at), coalesced == "1")
        except ValueError:
            return None  # not ours: skipped


class ConversationRules:
    """``prefetch`` and ``context_for`` as ``ferret.steps`` rules (see the module)."""

    def __init__(self, rules: ProducerRules) -> None:
        self.rules = rules

    def prefetch(self, namespace: str, conversation: str, query: str, **fields: Any) -> Step[JobHandle]:
        rules = self.rules
        key = conversation_key(namespace, conversation, rules.settings.limits.max_request_id_chars)
        ttl = rules.settings.service.ttls()["prefetch"][0]

        def push(job_id: str, envelope: JobEnvelope) -> ConversationPush:
            entry = _Entry(job_id, envelope.memory_version or 0, envelope.enqueued_at, envelope.deadline_at, False)
            return ConversationPush(key, str(entry), ttl, KEPT, PREFETCH_QUEUE_KEY)

        handle, queued = yield from rules.enqueue_with(
            {**fields, "query": query, "namespace": namespace, "queue": "prefetch"}, push)
        now = yield Now()
        if queued is None:  # no entry pushed with the put: the job was there already, or another was joined
            version = handle.memory_version
            if version is None:  # a job an earlier call enqueued under this request id
                version = yield from rules.memory_version(namespace)
            entry = _Entry(handle.job_id, version, now, handle.deadline_at or now, handle.coalesced or handle.duplicate)
            queued = (yield Call(("LRANGE", key, 0, -1)))
        else:
            entry = None
        older = [found for raw in queued
                 if (found := _Entry.parse(raw)) is not None and found.job_id != handle.job_id and not found.coalesced]
        if entry is None and not older:
            return handle  # the usual turn: the earlier prefetches have run, nothing to take off the queue
        script_keys = [key, PREFETCH_QUEUE_KEY, keys.superseded_count()]
        args: list[Any] = [str(entry) if entry is not None else "", ttl, KEPT, "1" if entry is not None else "0"]
        for old in older:
            script_keys += [keys.result(old.job_id), keys.done(old.job_id), job_key(old.job_id)]
            args += [old.job_id, stored_result(self._superseded(old, namespace, handle, now), rules.signing_key), ttl]
        yield Eval(_SUPERSEDE, tuple(script_keys), tuple(args))
        return handle

    @staticmethod
    def _superseded(old: _Entry, namespace: str, newer: JobHandle, now: float) -> RetrievalResult:
        return RetrievalResult(
            job_id=old.job_id, namespace=namespace, queue="prefetch", status="expired",
            error=f"superseded by a newer prefetch for this conversation (job {newer.job_id}); not run",
            stats=JobStats(superseded_by=newer.job_id),
            timestamps=Timestamps(enqueued_at=old.enqueued_at, deadline_at=old.deadline_at, finished_at=now))

    def context_for(self, namespace: str, conversation: str) -> Step[ConversationContext | None]:
        rules = self.rules
        key = conversation_key(namespace, conversation, rules.settings.limits.max_request_id_chars)
        newer_pending = False
        entries, *newest = yield Eval(_NEWEST, (key,), (keys.result(""), READ_CAP_BYTES))
        for raw in entries:
            entry = _Entry.parse(raw)
            if entry is None:
                continue
            if newest and text(newest[0]) == entry.job_id:
                result = parse_result(entry.job_id, newest[1] or None, rules.signing_key)
                newest = []
            else:
                result = yield from rules.result(entry.job_id)
            if result is None:
                newer_pending = True
                continue
            if result.stats.superseded_by is not None:
                continue
            now = yield Now()
            finished = result.timestamps.finished_at or now
            version = yield from rules.memory_version(namespace)
            return ConversationContext(result, max(0.0, now - finished), entry.version, version, newer_pending)
        return None
