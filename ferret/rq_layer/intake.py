"""What a worker takes off Ferret's queues: Ferret jobs, and nothing else.

Everything in Redis is untrusted. RQ imports and calls whatever function a
job hash names (JSON stops pickle, not that), and one malformed queue entry
(an id RQ refuses, a hash it cannot read, bytes that are not UTF-8) raises
out of RQ's dequeue and ends the worker. So Ferret's queue class reads each
entry itself and hands RQ only a job that is Ferret's own: its function is
``JOB_FUNCTION``, it takes one payload object, it names no callbacks and no
instance, and it belongs to the queue it came from. Every other entry is
refused before anything is imported: the worker's ``on_refused`` hook is
told (it writes a ``failed`` result for an entry with a Ferret job id and
counts it) and the worker goes on to the next entry.

Checks on the payload itself (its shape, and that its id is the one its
namespace and request id give) are the job core's (``ferret.worker.core.run``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis import Redis
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.exceptions import NoSuchJobError, StopRequested
from rq.intermediate_queue import IntermediateQueue
from rq.job import JOB_ID_PATTERN, Job, JobStatus, parse_job_id
from rq.queue import Queue
from rq.registry import FailedJobRegistry
from rq.results import Result
from rq.utils import get_version

from ferret.contract import FORMER_JOB_FUNCTIONS, JOB_FUNCTION
from ferret.repeated_lines import RepeatedLines
from ferret.rq_layer.bookkeeping import PARKED, LeanQueue
from ferret.rq_layer.bounded_job import JobDataTooLarge

logger = logging.getLogger(__name__)
_REFUSALS = RepeatedLines(logger)  # a flood of junk entries: a line per kind every few seconds, every one counted

_SHOWN_ID_CHARS = 80

# Redis's own trouble is not the entry's fault: let the worker's retry loop see it.
REDIS_FAULTS = (RedisConnectionError, RedisTimeoutError, OutOfMemoryError)
# Nor is a stop: RQ's signal handler raises StopRequested wherever an idle worker is (reading an entry
# too), and it must stop the worker, never end the job it was reading.
NOT_THE_ENTRY = (*REDIS_FAULTS, StopRequested)


def _stop_inside(exc: BaseException) -> StopRequested | None:
    """The stop an exception carries (RQ wraps what deserialising raises in DeserializationError)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        if isinstance(seen, StopRequested):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@dataclass(frozen=True)
class Refusal:
    """One queue entry the worker will not run."""

    reason: str  # one of REFUSAL_REASONS
    message: str
    queue: str
    job_id: str | None  # None when the entry is not a usable job id
    job: Job | None = None  # the job hash, when it could be read

    def shown_id(self, raw: bytes | str | None = None) -> str:
        return repr(self.job_id if self.job_id is not None else raw)[:_SHOWN_ID_CHARS]


def registry_entry_id(entry: Any) -> bytes:
    """The job id part of a started-registry entry (``job_id`` or ``job_id:execution_id``), as bytes."""
    raw = entry if isinstance(entry, bytes) else str(entry).encode()
    return raw.split(b":", 1)[0]


def _readable_id(raw: bytes) -> str | None:
    """The entry as RQ would take it, or None when RQ would raise on it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if JOB_ID_PATTERN.fullmatch(text) else None


def refusal_of(job: Job, queue: str) -> Refusal | None:
    """Why ``job`` is not a Ferret job RQ may run, or None when it is one.

    Reads only what the hash holds (JSON); imports nothing."""
    def refused(reason: str, message: str) -> Refusal:
        return Refusal(reason, message, queue, job.id, job)

    try:
        func_name, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
    except Exception as exc:  # the data is not JSON, not UTF-8, or not RQ's four fields
        if (stop := _stop_inside(exc)) is not None:
            raise stop from None
        return refused("malformed_job", f"job data cannot be read ({type(exc).__name__})")
    if (func_name != JOB_FUNCTION and func_name not in FORMER_JOB_FUNCTIONS) or instance is not None:
        shown = func_name if isinstance(func_name, str) else type(func_name).__name__
        return refused("not_ferret_job", f"not a Ferret job (function {shown[:100]!r})")
    callbacks = (job._success_callback_name, job._failure_callback_name, job._stopped_callback_name)
    if any(callbacks):
        return refused("not_ferret_job", "not a Ferret job (it names RQ callbacks, which Ferret never sets)")
    if kwargs or not isinstance(args, (list, tuple)) or len(args) != 1 or not isinstance(args[0], dict):
        return refused("bad_arguments", "a Ferret job takes exactly one payload object and no keyword arguments")
    if job.origin != queue:
        return refused("malformed_job", f"job says it belongs to queue {job.origin[:60]!r}, found on {queue!r}")
    return None


# The first waiting entries and their job hashes in one round trip (``GuardedDequeue.one_trip``): KEYS are
# the queues in order; ARGV[1] the job-hash key prefix; ARGV[2] how many entries at most; ARGV[2 + i] the
# intermediate queue of KEYS[i], where each entry taken is moved, as RQ's own LMOVE does for a worker of one
# queue (here whatever number of queues the worker serves, and on any Redis version): a worker lost before
# its start leaves its entries where the reaper's pass finds them (not when that key holds another type: then
# they are popped, as RQ pops for a worker of several queues). They all come from the first queue that has
# any (the queues' order is their priority), and no more are taken than are waiting: one entry when one
# waits. Answer: the queue's key, 1 when the entries were moved (else 0), then each entry and its hash. An
# entry whose key is not a hash is moved all the same and answered with false for its hash (refused as
# malformed, as a failed read is).
_TAKE = """
local most = tonumber(ARGV[2]) or 1
for position, queue in ipairs(KEYS) do
  local taking = 1
  if most > 1 then
    taking = math.min(most, redis.call('LLEN', queue))
  end
  local parked = ARGV[2 + position]
  local kind = redis.call('TYPE', parked)['ok']
  if kind ~= 'list' and kind ~= 'none' then
    parked = false  -- not a list (set aside by the next maintenance pass): the entries are popped as RQ pops
  end
  local answer = {queue, parked and 1 or 0}
  for _ = 1, math.max(taking, 1) do
    local entry = redis.call('LPOP', queue)
    if not entry then
      break
    end
    if parked then
      redis.call('RPUSH', parked, entry)  -- in one script: RQ's LMOVE, on any Redis version
    end
    local hash = redis.pcall('HGETALL', ARGV[1] .. entry)
    if type(hash) == 'table' and hash.err then
      hash = false
    end
    answer[#answer + 1] = entry
    answer[#answer + 1] = hash
  end
  if #answer > 2 then
    return answer
  end
end
return false
"""


class GuardedDequeue:
    """Mixin for an RQ queue class (put it first): only Ferret jobs come out.

    ``on_refused`` is set per worker (see ``guarded_queue_class``); it must
    not raise, and is called for every entry that is not run. With
    ``one_trip`` (the lean layer), waiting entries and their job hashes are
    read in one round trip (one Lua call) instead of RQ's pop and then its
    read; when the queues are empty the worker blocks as RQ does. Up to
    ``take_up_to`` entries come off in that trip when that many are waiting
    (its worker sets it, ``ferret.rq_layer.trip_batching``): the first is
    returned and the others are ``held``, for the worker's next dequeues,
    which then make no trip."""

    on_refused: Callable[[Refusal], None] = staticmethod(lambda refusal: None)  # type: ignore[assignment]
    one_trip: bool = False
    take_up_to: int = 1
    held: deque[tuple[Job, Queue]] | None = None  # a worker's own (guarded_queue_class), else none
    # Whether the next blocking dequeue first looks for waiting entries (the one-trip take). After a
    # blocking pop, only when entries were waiting behind the one it took (counted with its hash's read, in
    # the same round trip): jobs arriving one at a time find the queues empty, and a look first would be a
    # round trip that finds nothing before the pop that follows.
    look_first: bool = True

    @classmethod
    def dequeue_any(cls: Any, queues: Iterable[Queue], timeout: int | None, connection: Redis,
                    job_class: type[Job] | None = None, serializer: Any = None,
                    death_penalty_class: Any = None) -> tuple[Job, Queue] | None:
        """RQ's dequeue, reading each entry as untrusted input (see the module)."""
        if cls.held:
            return cast(tuple[Job, Queue], cls.held.popleft())
        queues = list(queues)
        job_cls = job_class or cls.job_class
        most = cls.take_up_to if cls.held is not None else 1
        while True:
            keys = [q.key for q in queues]
            single = len(keys) == 1 and get_version(connection) >= (6, 2, 0)
            looks = cls.one_trip and (cls.look_first or timeout is None)
            taken = _take(connection, keys, most) if looks else None
            entries: list[tuple[bytes, StoredHash | None]]
            if taken is not None:
                queue_key, parked, found = taken
                entries = list(found)
            else:
                if cls.one_trip and timeout is None:  # not blocking, and the queues were empty just now
                    return None
                popped = (cls.lmove(connection, keys[0], timeout) if single
                          else cls.lpop(keys, timeout, connection=connection))
                if popped is None:
                    cls.look_first = True
                    return None
                queue_key, raw = popped
                entries = [(raw if isinstance(raw, bytes) else str(raw).encode(), None)]
                parked = single  # RQ's pop: a move into the intermediate queue for a worker of one queue
            queue_key = queue_key.decode() if isinstance(queue_key, bytes) else queue_key
            queue = cls.from_queue_key(queue_key, connection=connection, job_class=job_cls,
                                       serializer=serializer, death_penalty_class=death_penalty_class)
            if cls.one_trip and taken is None:
                stored, parked, cls.look_first = _read_after_pop(connection, queue, job_cls, entries[0][0], keys,
                                                                 moved=single)
                entries = [(entries[0][0], stored)]
            accepted = cls._accepted(entries, queue, job_cls, connection, serializer, parked)
            if accepted:
                if cls.held is not None:
                    cls.held.extend((job, queue) for job in accepted[1:])
                return accepted[0], queue

    @classmethod
    def _accepted(cls: Any, entries: list[tuple[bytes, StoredHash | None]], queue: Queue, job_cls: type[Job],
                  connection: Redis, serializer: Any, parked: bool) -> list[Job]:
        """The Ferret jobs among ``entries``, in order; every other entry is refused (and reported).
        ``parked``: the entries are in their queue's intermediate queue, and each job says so (``PARKED``),
        for its start to take it out."""
        jobs: list[Job] = []
        for index, (raw, stored) in enumerate(entries):
            try:
                job, refusal = take_entry(job_cls, raw, queue, connection, serializer, stored)
            except StopRequested:  # the worker stops while reading an entry: what it took goes back, untouched
                _put_back(connection, queue, [job.id.encode() for job in jobs] + [r for r, _ in entries[index:]])
                raise
            if job is not None:
                setattr(job, PARKED, parked)
                jobs.append(job)
                continue
            if refusal is not None:
                if parked:
                    connection.lrem(queue.intermediate_queue_key, 1, raw)  # type: ignore[arg-type]
                if refusal.job_id is None:  # one naming a job id is logged where it is recorded (record_refusal)
                    _REFUSALS.warning(f"refused entries of queue {queue.name} ({refusal.reason})",
                                      "queue %s: refused entry %s: %s", queue.name, refusal.shown_id(raw),
                                      refusal.message)
                _notify(cls.on_refused, refusal)
        return jobs


StoredHash = dict[bytes, bytes] | Exception  # a job hash read with its entry, or why it could not be
_take_script: Script | None = None


def _take(connection: Redis, queue_keys: list[str],
          most: int = 1) -> tuple[Any, bool, list[tuple[bytes, StoredHash]]] | None:
    """The first waiting entries of ``queue_keys`` (up to ``most``, all of one queue, as many as wait
    there) with their job hashes, in one round trip: the queue's key as Redis gave it, whether the entries
    were moved into its intermediate queue, and each entry with its hash; None when every queue is empty."""
    global _take_script
    if _take_script is None:
        _take_script = connection.register_script(_TAKE)  # EVALSHA, the script loaded on first use
    intermediates = [IntermediateQueue.get_intermediate_queue_key(key) for key in queue_keys]
    found = _take_script(keys=queue_keys, args=[Job.redis_job_namespace_prefix, most, *intermediates],
                         client=connection)
    if not found:
        return None
    queue_key, parked, rest = found[0], bool(found[1]), found[2:]
    entries: list[tuple[bytes, StoredHash]] = []
    for raw, fields in zip(rest[::2], rest[1::2], strict=True):
        raw = raw if isinstance(raw, bytes) else str(raw).encode()
        if not isinstance(fields, list):  # Lua's false: the entry's key holds another type
            entries.append((raw, ValueError("the entry's job key is not a hash")))
        else:
            entries.append((raw, dict(zip(fields[::2], fields[1::2], strict=True))))
    return queue_key, parked, entries


def _read_after_pop(connection: Redis, queue: Queue, job_cls: type[Job], raw: bytes, queue_keys: list[str],
                    moved: bool) -> tuple[StoredHash | None, bool, bool]:
    """After a blocking pop, in one round trip: the entry's job hash (when the entry names a job), whether
    the entry is in its queue's intermediate queue, and whether entries wait in ``queue_keys``. An entry the
    pop did not move there (a ``BLPOP`` from several queues: Redis has no blocking move from several lists)
    is put there first, in the same round trip, where a worker lost before the job's start leaves it for
    the reaper. A stop meanwhile puts the entry back, untouched."""
    job_id = _readable_id(raw)
    try:
        with connection.pipeline(transaction=False) as pipe:
            if not moved:
                pipe.rpush(queue.intermediate_queue_key, raw)
            if job_id is not None:
                pipe.hgetall(job_cls.key_for(job_id))
            for key in queue_keys:
                pipe.llen(key)
            answers = pipe.execute(raise_on_error=False)
    except StopRequested:
        _put_back(connection, queue, [raw])
        raise
    waiting = any(isinstance(count, int) and count > 0 for count in answers[len(answers) - len(queue_keys):])
    parked = moved or not isinstance(answers[0], Exception)  # the push fails on a key of another type
    if job_id is None:
        return None, parked, waiting  # refused by its id, before any read
    fields = answers[0 if moved else 1]
    if isinstance(fields, Exception):  # WRONGTYPE: the key holds another type
        if isinstance(fields, REDIS_FAULTS):
            raise fields
        return fields, parked, waiting
    return cast(dict[bytes, bytes], fields), parked, waiting


# Entries back at the front of a queue, in order (ARGV), out of its intermediate queue (KEYS[1]) first. An
# intermediate queue of another type (anyone can write to Redis) holds none of them: it is left to the next
# maintenance pass to set aside, and the entries still go back; as plain commands its LREM's WRONGTYPE would
# raise out of the put-back after the entries were back (a stop turned into an error).
_PUT_BACK = """
if redis.call('TYPE', KEYS[1])['ok'] == 'list' then
  for _, entry in ipairs(ARGV) do
    redis.call('LREM', KEYS[1], 1, entry)
  end
end
for position = #ARGV, 1, -1 do
  redis.call('LPUSH', KEYS[2], ARGV[position])
end
return #ARGV
"""


def put_back_commands(pipe: Any, queue: Queue, raws: Sequence[bytes | str]) -> None:
    """Into ``pipe``: entries taken off ``queue`` (into its intermediate queue, when it has one) back to its
    front, in their order, for the next worker (one script: ``_PUT_BACK``, sent whole, as a put-back is rare)."""
    if raws:
        pipe.eval(_PUT_BACK, 2, queue.intermediate_queue_key, queue.key, *raws)


def _put_back(connection: Redis, queue: Queue, raws: list[bytes]) -> None:
    with connection.pipeline() as pipe:
        put_back_commands(pipe, queue, raws)
        pipe.execute()
    logger.warning("queue %s: stopped while reading entries %s; put back", queue.name,
                   ", ".join(repr(raw[:_SHOWN_ID_CHARS]) for raw in raws[:3]) + (" ..." if len(raws) > 3 else ""))


def take_entry(job_cls: type[Job], raw: bytes | str, queue: Queue, connection: Redis,
               serializer: Any, stored: StoredHash | None = None) -> tuple[Job | None, Refusal | None]:
    """The Ferret job a queue or registry entry names, or why it is refused; ``stored``: its job hash,
    when it was read with the entry (else it is read here)."""
    job_id = _readable_id(raw if isinstance(raw, bytes) else raw.encode())
    if job_id is None:
        return None, Refusal("bad_id", "not a valid RQ job id", queue.name, None)
    try:
        job = job_cls.fetch(job_id, connection=connection, serializer=serializer) if stored is None \
            else _restored(job_cls, job_id, connection, serializer, stored)
    except NoSuchJobError as exc:
        missing = "has no job hash" if "Unexpected job format" not in str(exc) else "job hash has no data"
        return None, Refusal("no_job_hash", missing, queue.name, job_id)
    except NOT_THE_ENTRY:
        raise
    except JobDataTooLarge as exc:  # a zlib bomb, stopped at the cap (ferret.rq_layer.bounded_job)
        return None, Refusal("data_too_large", str(exc), queue.name, job_id)
    except Exception as exc:  # a field RQ cannot parse (a date, a status, a number, bytes)
        if (stop := _stop_inside(exc)) is not None:
            raise stop from None
        return None, Refusal("malformed_job", f"job hash cannot be read ({type(exc).__name__})", queue.name, job_id)
    refusal = refusal_of(job, queue.name)
    if refusal is not None:
        return None, refusal
    if job.func_name in FORMER_JOB_FUNCTIONS:
        job._func_name = JOB_FUNCTION  # an older producer's name for it: RQ imports the function by this one
    return job, None


def _restored(job_cls: type[Job], job_id: str, connection: Redis, serializer: Any, stored: StoredHash) -> Job:
    """``Job.fetch`` from a hash already read: the same job, the same errors."""
    if isinstance(stored, Exception):
        raise stored
    job = job_cls(parse_job_id(job_id), connection=connection, serializer=serializer)
    if not stored:
        raise NoSuchJobError(f"No such job: {job.key}")
    job.restore(stored)
    return job


def _notify(hook: Callable[[Refusal], None], refusal: Refusal) -> None:
    try:
        hook(refusal)
    except NOT_THE_ENTRY:
        raise
    except Exception:  # an observer must not stop the worker
        logger.exception("queue %s: handling a refused entry failed", refusal.queue)


def guarded_queue_class(on_refused: Callable[[Refusal], None], lean: bool = True) -> type[Queue]:
    """Ferret's queue class for one worker: refusals go to ``on_refused``; over
    ``LeanQueue`` (no dependents look-up, see ``bookkeeping``) or RQ's own ``Queue``."""
    base = LeanQueue if lean else Queue
    return type("GuardedQueue", (GuardedDequeue, base),
                {"on_refused": staticmethod(on_refused), "one_trip": lean, "held": deque()})


def mark_failed(job: Job, queue: Queue, message: str, worker_name: str = "") -> None:
    """End a refused job as RQ's ``failed`` (failed registry and a failure
    result carrying ``message``) without running anything it names: no
    callbacks (``refusal_of`` refused those) and nothing imported."""
    job._success_callback_name = job._failure_callback_name = job._stopped_callback_name = None
    job._status = JobStatus.FAILED
    with queue.connection.pipeline() as pipe:
        FailedJobRegistry(queue=queue, serializer=queue.serializer).add(job, ttl=job.failure_ttl, exc_string=message,
                                                                         pipeline=pipe)
        Result.create_failure(job, job.failure_ttl, exc_string=message, worker_name=worker_name, pipeline=pipe)
        pipe.execute()
