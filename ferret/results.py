"""Results and traces in Redis: written once, read and waited on.

The worker writes a final result, its trace and a "done" token in one Lua
script (result and trace packed: ``ferret.packed``): the first final result
for a job wins (a job re-run after a crash cannot replace it; the same write
sent again after its answer was lost finds itself, and is answered as
written), a trace id
already holding another job's trace is never overwritten (nothing is
written and the caller picks a new id), and every key gets a TTL. Waiters
block on the done list instead of polling: a blocking move of the list onto
itself (BLMOVE), which leaves the token there for other waiters, with the
result's read pipelined behind it; the script also publishes on a channel
named as the done list, for waiters that share one connection
(``ferret.producer.done_hub``).

A cache entry written with a result is also entered in the cache index (a
sorted set by write time); past ``cache_max_entries`` the oldest entries are
deleted in the same script, so the cache is bounded by its TTL and by that
cap whatever the traffic, and nothing but cache entries is ever evicted.
"""

from __future__ import annotations

import json
import time
from enum import IntEnum
from typing import Any, cast

import redis
from pydantic import ValidationError
from pydantic_core import to_json

from ferret import keys
from ferret.contract import RetrievalResult
from ferret.errors import BadResult, ForeignResult
from ferret.packed import MAX_VALUE_BYTES, UnpackFailed, pack, unpack
from ferret.redis_plumbing.clock import Clock, RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.result_json import result_json
from ferret.signing import result_signature_holds, sign_result, split_result
from ferret.steps import Call, Step

WAIT_SLICE_SECONDS = 2.0
SHORTEST_BLOCK_SECONDS = 0.01  # Redis reads a blocking timeout of 0 as forever: less than this is a plain read
UNBLOCKED_PAUSE_SECONDS = 0.1  # between slices that came back at once with no result

# A result already there is another run's, or this very write's sent again (its answer lost with the
# connection, the client's retry): the same bytes, answered as written, not as another run's.
# The write is a Lua function of where its keys and arguments start (``k``, ``a``: 0 for the script alone), so
# a script that writes results and then RQ's success of their jobs (``ferret.worker.core.held_results``) runs
# this very code.
WRITE_ONCE_FUNCTION = """
local function write_once(k, a)
  if redis.call('EXISTS', KEYS[k + 1]) == 1 then
    if redis.pcall('GET', KEYS[k + 1]) == ARGV[a + 1] then return 1 end
    return 0
  end
  if ARGV[a + 2] ~= '' and redis.call('EXISTS', KEYS[k + 2]) == 1 then return 2 end
  if redis.call('SET', KEYS[k + 1], ARGV[a + 1], 'NX', 'EX', ARGV[a + 3]) then
    if ARGV[a + 2] ~= '' then redis.call('SET', KEYS[k + 2], ARGV[a + 2], 'EX', ARGV[a + 4]) end
    redis.call('DEL', KEYS[k + 3])
    redis.call('RPUSH', KEYS[k + 3], '1')
    redis.call('EXPIRE', KEYS[k + 3], ARGV[a + 3])
    redis.call('PUBLISH', KEYS[k + 3], '1')
    if ARGV[a + 5] ~= '' then
      redis.call('SET', KEYS[k + 4], ARGV[a + 5], 'EX', ARGV[a + 6])
      redis.call('ZADD', KEYS[k + 5], ARGV[a + 7], KEYS[k + 4])
      if redis.call('TTL', KEYS[k + 5]) < tonumber(ARGV[a + 6]) then redis.call('EXPIRE', KEYS[k + 5], ARGV[a + 6]) end
      local over = redis.call('ZCARD', KEYS[k + 5]) - tonumber(ARGV[a + 8])
      if over > 0 then
        local oldest = redis.call('ZPOPMIN', KEYS[k + 5], over)
        for i = 1, #oldest, 2 do
          if string.match(oldest[i], '^ferret:ns:[%w_.-]+:cache:%x+$') then redis.call('DEL', oldest[i]) end
        end
      end
    end
    return 1
  end
  return 0
end
"""
WRITE_KEYS, WRITE_ARGS = 5, 8  # how many keys and arguments one write takes

_WRITE_ONCE = WRITE_ONCE_FUNCTION + "return write_once(0, 0)\n"


class WriteOutcome(IntEnum):
    ALREADY_FINAL = 0  # a result was there: nothing written
    WRITTEN = 1
    TRACE_TAKEN = 2  # the trace id holds another job's trace: nothing written


READ_CAP_BYTES = MAX_VALUE_BYTES
_SPAN_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str, "span_id": str, "start_time_unix_nano": int, "end_time_unix_nano": int, "duration_ms": (int, float)}


def _is_trace(found: Any) -> bool:
    """A trace as Ferret writes it: spans with the fields every reader of a trace uses."""
    if not isinstance(found, dict) or not isinstance(found.get("spans"), list):
        return False
    return all(isinstance(span, dict) and all(isinstance(span.get(name), kind) and not isinstance(span.get(name), bool)
                                              for name, kind in _SPAN_FIELDS.items())
               for span in found["spans"])


class ResultStore:
    def __init__(self, client: redis.Redis, result_ttl: int = 3_600, trace_ttl: int = 21_600,
                 cache_max_entries: int = 10_000, by_queue: dict[str, tuple[int, int]] | None = None,
                 clock: Clock | None = None, replicas: ReplicaWait | None = None,
                 signing_key: bytes | None = None) -> None:
        """``result_ttl``/``trace_ttl``: for a result of a queue ``by_queue`` does not name;
        ``clock``: what stamps the cache index (Redis's clock, shared by every worker);
        ``signing_key``: results are signed when written and checked when read (``ferret.signing``)."""
        self.client = client
        self.signing_key = signing_key
        self.clock = clock or RedisClock(client)
        self.replicas = replicas  # a result write waits for them (ferret.redis_plumbing.replication)
        self.result_ttl = result_ttl
        self.trace_ttl = trace_ttl
        self.by_queue = by_queue or {}
        self.cache_max_entries = cache_max_entries
        self._write_once = client.register_script(_WRITE_ONCE)

    def write(self, result: RetrievalResult, trace: dict[str, Any] | None,
              cache: tuple[str, bytes, int] | None = None, body: bytes | None = None) -> WriteOutcome:
        """Store a final result (and trace, and a cache entry), in one call;
        nothing is written when a result is already there or the trace id is taken.
        ``body``: the result's JSON when the caller has it (it is not dumped again)."""
        written = self._write_once(*self.keys_and_args(result, trace, cache, body))
        if self.replicas is not None:
            self.replicas(f"the result of job {result.job_id}")
        return WriteOutcome(int(written))

    def write_on(self, pipeline: redis.client.Pipeline, result: RetrievalResult, trace: dict[str, Any] | None,
                 cache: tuple[str, bytes, int] | None = None, body: bytes | None = None) -> None:
        """``write``'s script queued on ``pipeline`` (no transaction: each write stands alone), by its digest:
        its answer is ``write``'s outcome as an int, or an error (``NOSCRIPT`` when Redis has not the script:
        ``load_write_script``). The replicas are the caller's to wait for, once for the pipeline."""
        keys_, args = self.keys_and_args(result, trace, cache, body)
        pipeline.execute_command("EVALSHA", self._write_once.sha, len(keys_), *keys_, *args)

    def load_write_script(self) -> None:
        """Load ``write``'s script into Redis (a fresh or restarted server has none)."""
        self.client.script_load(_WRITE_ONCE)

    def keys_and_args(self, result: RetrievalResult, trace: dict[str, Any] | None,
                      cache: tuple[str, bytes, int] | None, body: bytes | None) -> tuple[list[Any], list[Any]]:
        """The write script's keys (``WRITE_KEYS``) and arguments (``WRITE_ARGS``) for this result."""
        trace_key = keys.trace(result.trace_id) if result.trace_id else keys.trace("none")
        cache_key, cache_value, cache_ttl = cache or (keys.trace("none"), b"", 1)
        result_ttl, trace_ttl = self.by_queue.get(result.queue, (self.result_ttl, self.trace_ttl))
        return ([keys.result(result.job_id), trace_key, keys.done(result.job_id), cache_key, keys.cache_index()],
                [self.stored_form(result, body), pack(to_json(trace)) if trace else b"",
                 result_ttl, trace_ttl, cache_value, cache_ttl, self.clock.time(), self.cache_max_entries])

    def stored_form(self, result: RetrievalResult, body: bytes | None = None) -> bytes:
        """The bytes ``write`` stores for a result (``stored_result``)."""
        return stored_result(result, self.signing_key, body)

    def read(self, job_id: str) -> RetrievalResult | None:
        """The result stored for ``job_id`` (``read_result``)."""
        try:
            raw = self.client.getrange(keys.result(job_id), 0, READ_CAP_BYTES)
        except redis.ResponseError as exc:
            raise not_a_string(job_id, exc) from None
        return parse_result(job_id, cast(bytes | None, raw), self.signing_key)

    def exists(self, job_id: str) -> bool:
        return bool(self.client.exists(keys.result(job_id)))

    def answered(self, job_ids: list[str]) -> set[str]:
        """Those of ``job_ids`` that have a result, read in one round trip."""
        if not job_ids:
            return set()
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.exists(keys.result(job_id))
            return {job_id for job_id, there in zip(job_ids, pipe.execute(), strict=True) if there}

    def wait(self, job_id: str, timeout: float) -> RetrievalResult | None:
        """Block until the result exists or ``timeout`` seconds pass.

        Each slice of the wait is one round trip (``_slice``). Slices are shorter than any client socket
        timeout (redis-py 8 defaults to 5 s), so a long wait never reads as a dead connection."""
        deadline = time.monotonic() + timeout
        read_at_the_end = False  # the last slice blocked to its end, and its read came then: none is owed
        while (left := deadline - time.monotonic()) >= SHORTEST_BLOCK_SECONDS:
            found, at_once = self._slice(job_id, min(left, WAIT_SLICE_SECONDS))
            if found is not None:
                return found
            read_at_the_end = not at_once
            if at_once:  # no busy loop: the wait reads once a pause until it can block again
                time.sleep(min(UNBLOCKED_PAUSE_SECONDS, max(0.0, deadline - time.monotonic())))
        return None if read_at_the_end else self.read(job_id)  # no time left to block: the result as it is now

    def _slice(self, job_id: str, seconds: float) -> tuple[RetrievalResult | None, bool]:
        """One slice of a wait, in one round trip: the done list moved onto itself, blocking up to ``seconds``
        until it holds the token (a rotation, so the token stays for the job's other waiters and the list
        keeps its TTL), and the result's read pipelined behind it, which Redis runs once the move returns,
        with the token or at the slice's end. Once a wait took three round trips: a first read, the
        blocking pop, then the token pushed back with the read.

        The result read, and whether the slice came back at once without one: a token with no result under
        it (the result evicted, or a token pushed by anyone: Redis is untrusted), or the move refused (Redis
        full past ``maxmemory`` refuses a command that may add data, as ``BLMOVE`` may; something other than
        a list under the done key). The read behind it runs either way: a result already there is found."""
        done = keys.done(job_id)
        with self.client.pipeline(transaction=False) as pipe:
            pipe.execute_command("BLMOVE", done, done, "LEFT", "RIGHT", seconds)  # redis-py types it int seconds
            pipe.getrange(keys.result(job_id), 0, READ_CAP_BYTES)
            token, raw = pipe.execute(raise_on_error=False)  # a refusal comes back as a reply; anything else raises
        if isinstance(raw, redis.ResponseError):
            raise not_a_string(job_id, raw)
        return parse_result(job_id, cast(bytes | None, raw), self.signing_key), token is not None

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The trace stored under ``trace_id`` (``parse_trace``)."""
        try:
            raw = self.client.getrange(keys.trace(trace_id), 0, READ_CAP_BYTES)
        except redis.ResponseError:
            return None
        return parse_trace(cast(bytes | None, raw))


def stored_result(result: RetrievalResult, signing_key: bytes | None, body: bytes | None = None) -> bytes:
    """The bytes stored for a result: signed when a key is set, packed (``body``: its JSON, if dumped)."""
    body = result_json(result) if body is None else body
    return pack(sign_result(signing_key, body) if signing_key is not None else body)


def read_result(job_id: str, signing_key: bytes | None) -> Step[RetrievalResult | None]:
    """The result stored for ``job_id``, checked as untrusted input (``parse_result``);
    the wrong key type is ``BadResult``."""
    try:
        raw = yield Call(("GETRANGE", keys.result(job_id), 0, READ_CAP_BYTES))
    except redis.ResponseError as exc:
        raise not_a_string(job_id, exc) from None
    return parse_result(job_id, raw, signing_key)


def not_a_string(job_id: str, error: redis.ResponseError) -> BadResult:
    """What a read of the result's key that Redis refused says (WRONGTYPE: a list, a hash... under it)."""
    return BadResult(job_id, f"is not a string ({str(error).split(' ', 1)[0]})")


def read_trace(trace_id: str) -> Step[dict[str, Any] | None]:
    try:
        raw = yield Call(("GETRANGE", keys.trace(trace_id), 0, READ_CAP_BYTES))
    except redis.ResponseError:
        return None
    return parse_trace(raw)


def result_exists(job_id: str) -> Step[bool]:
    return bool((yield Call(("EXISTS", keys.result(job_id)))))


def parse_result(job_id: str, raw: bytes | None, signing_key: bytes | None) -> RetrievalResult | None:
    """A result read for ``job_id`` (at most ``READ_CAP_BYTES`` + 1 bytes), checked as untrusted
    input: garbage or the wrong shape is ``BadResult``, a result naming another job (or not
    signed with ``signing_key``, when there is one) ``ForeignResult``; None when there is none."""
    if not raw:
        return None
    if len(raw) > READ_CAP_BYTES:
        raise BadResult(job_id, f"is larger than any result ({READ_CAP_BYTES:,} bytes read)")
    try:
        stored = unpack(raw, READ_CAP_BYTES)
    except UnpackFailed as exc:
        raise BadResult(job_id, f"is not a result ({exc})") from None
    body, signature = split_result(stored)
    if signing_key is not None and not result_signature_holds(signing_key, body, signature):
        raise ForeignResult(job_id, "is not signed with the shared key" if signature is None
                            else "has a signature that does not match (another key, or changed)")
    try:
        found = RetrievalResult.model_validate_json(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "the document"
        raise BadResult(job_id, f"is not a result ({where}: {error['msg'][:120]})") from None
    if found.job_id != job_id:
        raise ForeignResult(job_id, f"names another job ({found.job_id[:80]!r})")
    return found


def parse_trace(raw: bytes | None) -> dict[str, Any] | None:
    """A trace as read (at most ``READ_CAP_BYTES`` + 1 bytes); None when there is none, or
    what is there is not a trace of ours (read as untrusted input)."""
    try:
        found = json.loads(unpack(raw, READ_CAP_BYTES)) if raw and len(raw) <= READ_CAP_BYTES else None
    except ValueError:  # UnpackFailed is a ValueError
        return None
    return found if _is_trace(found) else None
