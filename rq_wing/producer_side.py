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
from typing import Any

import redis
from rq import Queue, Worker
from rq.job import Job
from rq.results import Result
from rq.serializers import JSONSerializer

from ferret.clock import Clock
from ferret.contract import JOB_FUNCTION, QUEUES
from ferret.inflate import InflatesTooLarge, inflate_capped
from ferret.records import visible
from rq_wing.clock import use_clock

# RQ states after which RQ will not run the job again by itself.
ENDED_STATES = frozenset({"finished", "failed", "stopped", "canceled"})


class RQQueues:
    """Ferret's RQ queues, as a producer uses them."""

    def __init__(self, client: redis.Redis, clock: Clock | None = None) -> None:
        """``clock``: what RQ stamps this process's jobs and registry scores with (Redis's)."""
        self.client = client
        if clock is not None:
            use_clock(clock)
        self._queues = {name: Queue(name, connection=client, serializer=JSONSerializer) for name in QUEUES}

    def enqueue(self, queue: str, payload: dict[str, Any], job_id: str, timeout: int, failure_ttl: int) -> None:
        """Put one job on ``queue`` (RQ's hard timeout as given; see the module for the TTLs)."""
        namespace = payload.get("request", {}).get("namespace", "?") if isinstance(payload, dict) else "?"
        self._queues[queue].enqueue_call(JOB_FUNCTION, args=(payload,), job_id=job_id, timeout=timeout,
                                         result_ttl=0, failure_ttl=failure_ttl,
                                         description=f"ferret retrieval ({queue}, namespace {namespace})")

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
        status = self.client.hget(Job.key_for(job_id), "status")
        if status is None:
            return "unknown" if self.exists(job_id) else None  # a hash with no status: an old or odd one
        return status.decode(errors="replace") if isinstance(status, bytes) else str(status)

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
        """The queue RQ put the job on, None when there is no job."""
        origin = self.client.hget(Job.key_for(job_id), "origin")
        if origin is None:
            return None
        return origin.decode(errors="replace") if isinstance(origin, bytes) else str(origin)

    def live(self, job_id: str) -> bool:
        """Whether RQ may still run the job: it exists, has not ended in RQ's sense,
        and, when it says ``queued``, is still on a queue. A job whose entry left
        the queue without a worker starting it (a fault between the pop and the
        start) says ``queued`` for ever and would never run: it is not live."""
        state = self.state(job_id)
        if state is None or state in ENDED_STATES:
            return False
        return state != "queued" or self._on_a_queue(job_id)

    def _on_a_queue(self, job_id: str) -> bool:
        with self.client.pipeline(transaction=False) as pipe:
            for queue in self._queues.values():
                pipe.lpos(queue.key, job_id)
                pipe.lpos(queue.intermediate_queue_key, job_id)
            return any(position is not None for position in pipe.execute())


def workers_up(client: redis.Redis) -> int:
    """How many RQ workers are registered (alive within their TTL)."""
    return int(Worker.count(connection=client))


def worker_names(client: redis.Redis) -> list[str]:
    """The names of the RQ workers registered (alive within their TTL)."""
    return sorted(str(worker.name) for worker in Worker.all(connection=client))


def workers_serving(client: redis.Redis, queue: str) -> int:
    """How many registered workers listen on ``queue``."""
    return sum(1 for worker in Worker.all(connection=client) if queue in worker.queue_names())
