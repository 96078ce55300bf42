"""The producer's side of RQ: put a job envelope on a queue, read a job's RQ state.

Jobs are JSON (RQ's ``JSONSerializer``), never pickle, and always name
Ferret's one job function. A job that succeeds leaves nothing of RQ's
behind (``result_ttl=0``: RQ deletes its hash and writes no result stream):
Ferret's own result is the answer, and RQ's stream would cost ~4.7 KB of
Redis a job (a stream's first node) to say "finished". A failed job stays
in RQ's failed registry for ``failure_ttl``, for an operator to look at.
A job's description (what ``rq info`` and dashboards show) names its queue
and namespace, never the query (RQ's default writes the call, query text
included).
"""

from __future__ import annotations

import base64
import datetime
import functools
import threading
import zlib
from typing import Any

import redis
from redis.driver_info import DriverInfo
from rq import Queue, Worker
from rq.job import Job
from rq.results import Result
from rq.serializers import JSONSerializer
from rq.utils import utcformat
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from ferret import keys
from ferret.carriers import MEMBERS_FIELD, is_carrier, is_carrier_id
from ferret.contract import JOB_FUNCTION, QUEUES
from ferret.inflate import InflatesTooLarge, inflate_capped
from ferret.records import visible
from ferret.redis_plumbing.clock import Clock, HostClock, RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.steps import Batch, Call, Eval, Step, text
from ferret.steps_sync import SyncSteps

# RQ states after which RQ will not run the job again by itself.
ENDED_STATES = frozenset({"finished", "failed", "stopped", "canceled"})
_RQ_SERVER_VERSION = (7, 0, 0)  # what RQ would read with INFO; it changes nothing in an enqueue's commands


class EnqueueCommands:
    """The commands RQ sends to enqueue a job, taken from RQ's own enqueue (into a
    pipeline that is never sent) so that any client, blocking or asyncio, can send them
    in one transaction: RQ decides what a job is, Ferret only carries it.

    RQ's enqueue is run once per queue for a stand-in job; each job's commands are that template with its
    own id, data, description, stamps, hard timeout and failure TTL put in (``_Template``): the
    same commands RQ would send, without building RQ's job objects for every job (~45 us a job, most of the
    per-job Python of an enqueue). A test holds the two equal for varied jobs."""

    _shared: EnqueueCommands | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        # never connects: RQ only stacks commands on its pipeline (the driver's name given, not looked up in
        # the installed packages' metadata, ~0.6 ms a client)
        self._idle = redis.Redis(driver_info=DriverInfo(name="redis-py", lib_version=redis.__version__))
        self._queues = {name: Queue(name, connection=self._idle, serializer=JSONSerializer) for name in QUEUES}
        for queue in self._queues.values():
            queue.redis_server_version = _RQ_SERVER_VERSION
        self._templates: dict[str, _Template] = {}  # by queue

    @classmethod
    def shared(cls) -> EnqueueCommands:
        """The process's one instance: what it holds (RQ's queues on a client that never connects, and each
        queue's template) is the same for every producer, and building it is ~1 ms of a client's start."""
        if cls._shared is None:
            with cls._shared_lock:
                if cls._shared is None:
                    cls._shared = cls()
        return cls._shared

    def __call__(self, queue: str, payload: dict[str, Any], job_id: str, timeout: int,
                 failure_ttl: int, now: float | None = None) -> tuple[tuple[Any, ...], ...]:
        """Put one job on ``queue`` (RQ's hard timeout as given; see the module for the TTLs). ``now``: the
        producer's reading of Redis's clock, which the job's ``created_at`` and ``enqueued_at`` carry (RQ's
        own clock, ``rq.utils.now``, is left as the process has it: without ``now``, RQ's enqueue is run
        for the job itself)."""
        if now is None:
            return self.from_rq(queue, payload, job_id, timeout, failure_ttl)
        template = self._templates.get(queue)
        if template is None:
            template = _Template(self.from_rq(queue, _STAND_IN_PAYLOAD, _STAND_IN_ID, _STAND_IN_TIMEOUT,
                                              _STAND_IN_FAILURE_TTL, _STAND_IN_NOW))
            self._templates[queue] = template
        return template.filled(payload, job_id, _description(queue, payload), rq_stamp(now), timeout, failure_ttl)

    def from_rq(self, queue: str, payload: dict[str, Any], job_id: str, timeout: int, failure_ttl: int,
                now: float | None = None) -> tuple[tuple[Any, ...], ...]:
        """The commands of RQ's own enqueue of this job (stamped with ``now`` when given)."""
        pipe = self._idle.pipeline(transaction=True)
        self._queues[queue].enqueue_call(JOB_FUNCTION, args=(payload,), job_id=job_id, timeout=timeout,
                                         result_ttl=0, failure_ttl=failure_ttl, pipeline=pipe,
                                         description=_description(queue, payload))
        commands = tuple(tuple(args) for args, _options in pipe.command_stack)
        return commands if now is None else _stamped(commands, str(Job.key_for(job_id)), rq_stamp(now))


def _description(queue: str, payload: Any) -> str:
    """What ``rq info`` and dashboards show for a job: its queue and namespace, never the query."""
    if is_carrier(payload) and isinstance(payload.get(MEMBERS_FIELD), list):
        return f"ferret retrieval ({queue}, {len(payload[MEMBERS_FIELD])} lines)"
    namespace = payload.get("request", {}).get("namespace", "?") if isinstance(payload, dict) else "?"
    return f"ferret retrieval ({queue}, namespace {namespace})"


def rq_stamp(now: float) -> str:
    """``now`` (seconds) in RQ's own format of a job's stamps."""
    return str(utcformat(datetime.datetime.fromtimestamp(now, tz=datetime.UTC)))


_STAND_IN_ID = "ferret-template-job"
_STAND_IN_PAYLOAD: dict[str, Any] = {"request": {"namespace": "ferret-template"}}
_STAND_IN_NOW = 0.0
_STAND_IN_TIMEOUT = 7
_STAND_IN_FAILURE_TTL = 11


class _Template:
    """One queue's enqueue commands with the job's own parts left as holes: the job hash's key, its
    ``data`` (RQ's: the call ``(function, None, (payload,), {})`` as JSON, zlib-compressed), description,
    stamps, hard timeout and failure TTL, and the id the queue's list gets."""

    def __init__(self, commands: tuple[tuple[Any, ...], ...]) -> None:
        stand_in_key = str(Job.key_for(_STAND_IN_ID))
        holes = {"data", "description", "timeout", "failure_ttl", *_STAMPS}
        self.commands: list[tuple[Any, ...]] = []
        self.job_key_at: list[int] = []  # commands whose second word is the job hash's key
        self.id_at: list[tuple[int, int]] = []  # (command, word) where the job id itself stands
        self.fields_at: list[tuple[int, int, str]] = []  # (command, word, field) of the holes' values
        for c, command in enumerate(commands):
            words = list(command)
            if len(words) > 1 and words[1] == stand_in_key:
                self.job_key_at.append(c)
                if words[0] == "HSET":
                    for w in range(2, len(words) - 1, 2):
                        if words[w] in holes:
                            self.fields_at.append((c, w + 1, words[w]))
            self.id_at += [(c, w) for w, word in enumerate(words) if word == _STAND_IN_ID]
            if any(isinstance(word, str) and _STAND_IN_ID in word and word not in (stand_in_key, _STAND_IN_ID)
                   for word in words):
                raise ValueError(f"RQ's enqueue names the job in a form this template does not fill: {words}")
            self.commands.append(tuple(words))

    def filled(self, payload: dict[str, Any], job_id: str, description: str, stamp: str, timeout: int,
               failure_ttl: int) -> tuple[tuple[Any, ...], ...]:
        values = {"data": zlib.compress(JSONSerializer.dumps((JOB_FUNCTION, None, (payload,), {}))),
                  "description": description, "timeout": timeout, "failure_ttl": failure_ttl,
                  **dict.fromkeys(_STAMPS, stamp)}
        out = [list(command) for command in self.commands]
        key = str(Job.key_for(job_id))
        for c in self.job_key_at:
            out[c][1] = key
        for c, w in self.id_at:
            out[c][w] = job_id
        for c, w, name in self.fields_at:
            out[c][w] = values[name]
        return tuple(tuple(command) for command in out)


_STAMPS = frozenset({"created_at", "enqueued_at"})


def _stamped(commands: tuple[tuple[Any, ...], ...], job_key: str, stamp: str) -> tuple[tuple[Any, ...], ...]:
    """``commands`` with the job hash's enqueue stamps set to ``stamp``."""
    out = []
    for command in commands:
        if command[0] == "HSET" and command[1] == job_key:
            fields = list(command[2:])
            for i in range(0, len(fields) - 1, 2):
                if fields[i] in _STAMPS:
                    fields[i + 1] = stamp
            command = (*command[:2], *fields)
        out.append(command)
    return tuple(out)


@functools.cache
def _queue_lists() -> tuple[str, ...]:
    """The Redis lists a queued job's id can be on: each queue's, and its intermediate list."""
    idle = redis.Redis()  # never connects
    queues = [Queue(name, connection=idle) for name in QUEUES]
    return tuple(key for queue in queues for key in (queue.key, queue.intermediate_queue_key))


def job_key(job_id: str) -> str:
    """The Redis hash RQ keeps a job in."""
    return str(Job.key_for(job_id))


PREFETCH_QUEUE_KEY = Queue.redis_queue_namespace_prefix + "prefetch"  # the list RQ keeps prefetch jobs in


def job_state(job_id: str) -> Step[str | None]:
    """RQ's state of the job (queued, started, finished, failed, ...), None when there is no job. A batch
    line that rides in a carrier (``ferret.carriers``) is in its carrier's state: RQ has no job of its own."""
    _, state = yield from rq_job_of(job_id)
    return state


def rq_job_of(job_id: str) -> Step[tuple[str, str | None]]:
    """The RQ job that runs ``job_id`` (itself, or the carrier it rides in) and that job's state."""
    asked = (("HGET", Job.key_for(job_id), "status"), ("EXISTS", Job.key_for(job_id)))
    try:
        status, exists, carrier = yield Batch((*asked, ("GET", keys.carried_by(job_id))))
    except redis.ResponseError:  # the pointer's key holds another type (anyone can write to Redis): none
        status, exists = yield Batch(asked)
        carrier = None
    carrier_id = text(carrier)
    if status is None and not exists and is_carrier_id(carrier_id) and not is_carrier_id(job_id):
        return (yield from rq_job_of(str(carrier_id)))
    if status is None:
        return job_id, "unknown" if exists else None  # a hash with no status: an old or odd one
    return job_id, text(status)


def job_origin(job_id: str) -> Step[str | None]:
    """The queue RQ put the job on, None when there is no job."""
    return text((yield Call(("HGET", Job.key_for(job_id), "origin"))))


# Whether ARGV[1] is on one of the lists KEYS name; a key of another type (anyone can write to Redis)
# is a list it is not on, not an error that ends the producer's wait.
_ON_A_LIST = """
for _, key in ipairs(KEYS) do
  if type(redis.pcall('LPOS', key, ARGV[1])) == 'number' then
    return 1
  end
end
return 0
"""


def job_live(job_id: str) -> Step[bool]:
    """Whether RQ may still run the job: it exists, has not ended in RQ's sense,
    and, when it says ``queued``, is still on a queue. A job whose entry left
    the queue without a worker starting it (a fault between the pop and the
    start) says ``queued`` for ever and would never run: it is not live. A carrier's member is as live as
    its carrier."""
    rq_id, state = yield from rq_job_of(job_id)
    if state is None or state in ENDED_STATES:
        return False
    if state != "queued":
        return True
    return bool((yield Eval(_ON_A_LIST, _queue_lists(), (rq_id,))))


def workers_serving_step(queue: str) -> Step[int]:
    """How many registered workers (alive within their TTL) listen on ``queue``."""
    names = yield Call(("SMEMBERS", WORKERS_BY_QUEUE_KEY % queue))
    if not names:
        return 0
    alive = yield Batch(tuple(("EXISTS", name) for name in names))
    return sum(1 for found in alive if found)


class RQQueues:
    """Ferret's RQ queues, as a producer uses them."""

    def __init__(self, client: redis.Redis, clock: Clock | None = None) -> None:
        """``clock``: Redis's, for the steps this side runs; RQ's own clock is left as the process has it."""
        self.client = client
        self._queues = {name: Queue(name, connection=client, serializer=JSONSerializer) for name in QUEUES}
        self._steps = SyncSteps(client, client, clock or RedisClock(client), ReplicaWait(client, 0, 0))
        self.commands = EnqueueCommands.shared()

    def enqueue(self, queue: str, payload: dict[str, Any], job_id: str, timeout: int, failure_ttl: int) -> None:
        """Put one job on ``queue``, in one transaction (``EnqueueCommands``), stamped on Redis's clock."""
        now = self._steps.clock.time()
        self._steps.do(Batch(self.commands(queue, payload, job_id, timeout, failure_ttl, now), transaction=True))

    def queue_key(self, queue: str) -> str:
        """The Redis list RQ keeps ``queue``'s waiting jobs in."""
        return str(self._queues[queue].key)

    @staticmethod
    def job_key(job_id: str) -> str:
        """The Redis hash RQ keeps a job in."""
        return str(Job.key_for(job_id))

    def exists(self, job_id: str) -> bool:
        return bool(Job.exists(job_id, connection=self.client))

    def state(self, job_id: str) -> str | None:
        """RQ's state of the job (queued, started, finished, failed, ...), None when there is no job."""
        return self._steps.run(job_state(job_id))

    def ended_reason(self, job_id: str) -> str | None:
        """The last line of the error RQ recorded when it ended the job (failed, stopped), if any.
        Read as untrusted input: at most 64 KiB inflated, control characters shown escaped."""
        try:
            entries = self.client.xrevrange(Result.get_key(job_id), count=1)
        except redis.ResponseError:  # not a stream: not RQ's
            return None
        fields = entries[0][1] if entries else {}
        raw = fields.get(b"exc_string") if isinstance(fields, dict) else None
        if not raw:
            return None
        try:
            text = inflate_capped(base64.b64decode(raw, validate=True), 64 * 1024)
        except (ValueError, InflatesTooLarge):
            return None
        lines = [line for line in (text or b"").decode(errors="replace").splitlines() if line.strip()]
        return visible(lines[-1].strip())[:300] if lines else None

    def origin(self, job_id: str) -> str | None:
        return self._steps.run(job_origin(job_id))

    def live(self, job_id: str) -> bool:
        return self._steps.run(job_live(job_id))


def workers_up(client: redis.Redis) -> int:
    """How many RQ workers are registered (alive within their TTL)."""
    return int(Worker.count(connection=client))


def worker_names(client: redis.Redis) -> list[str]:
    """The names of the RQ workers registered (alive within their TTL)."""
    return sorted(str(worker.name) for worker in Worker.all(connection=client))


def workers_serving(client: redis.Redis, queue: str) -> int:
    """How many registered workers listen on ``queue``."""
    return SyncSteps(client, client, HostClock(), ReplicaWait(client, 0, 0)).run(workers_serving_step(queue))
