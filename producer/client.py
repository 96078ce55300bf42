"""The producer library: enqueue, result, wait, trace.

Requests are validated here before anything reaches Redis (and again by the
worker). Jobs are JSON on the queue, never pickle. The same ``request_id``
in the same namespace is one job: its job id is derived from the pair, and
enqueueing it again returns the existing job unless that job was lost (no
Ferret result, and no RQ job that can still run: none at all, or one RQ
ended as failed, stopped, cancelled or finished), in which case it is
enqueued again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from ferret import keys
from ferret.cache import answer_fingerprint, cache_key, inflight_key
from ferret.clock import RedisClock
from ferret.contract import RetrievalRequest, RetrievalResult, parse_request
from ferret.envelope import JobEnvelope
from ferret.errors import ForeignResult, InvalidRequest, JobNotFound, RedisUnreachable, ResultTimeout
from ferret.job_ids import job_id_for
from ferret.replication import ReplicaWait
from ferret.results import ResultStore
from ferret.settings import Settings
from ferret.signing import sign_job
from ferret.store_conn import store_client
from ferret.tracing import new_trace_id
from producer.conversations import ConversationContext, Conversations
from rq_wing.producer_side import RQQueues, workers_serving

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobHandle:
    job_id: str
    queue: str
    namespace: str
    request_id: str | None
    trace_id: str
    duplicate: bool = False
    coalesced: bool = False  # joined an identical prefetch request already in flight
    deadline_at: float | None = None  # epoch seconds; known for a job this call enqueued
    # The request, for a job this call enqueued: ``wait`` enqueues it again if a failover lost it.
    request: RetrievalRequest | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class JobState:
    """Where a job is, as two fields: Ferret's final status (``ok``, ``partial``,
    ``expired``, ``failed``; None until there is one) and RQ's state of the
    job (``queued``, ``started``, ``finished``, ``failed``, ...; None when RQ
    has no job under the id: never enqueued, or its record expired)."""

    job_id: str
    status: str | None
    rq_state: str | None

    @property
    def known(self) -> bool:
        return self.status is not None or self.rq_state is not None

    def to_dict(self) -> dict[str, str | None]:
        return {"job_id": self.job_id, "status": self.status, "rq_state": self.rq_state}


def _request_digest(request: RetrievalRequest) -> str:
    """What makes two requests under one request id the same request."""
    fields = {"query", "filters", "options", "queue"} | ({"history"} if request.history else set())
    material = request.model_dump(mode="json", include=fields)
    if not request.options.agent:  # as before the option existed: the same request, the same digest
        material["options"].pop("agent")
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def _check_owner(found: RetrievalResult, job: JobHandle) -> None:
    """The result is the one asked for: its job id (checked on read), namespace and request id."""
    if found.namespace != job.namespace or (job.request_id is not None and found.request_id != job.request_id):
        raise ForeignResult(job.job_id, f"names namespace {found.namespace[:64]!r} and request "
                                        f"{(found.request_id or '')[:64]!r}, not the ones asked for")


class Producer:
    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.clock = RedisClock(client)  # the workers judge the deadline on Redis's clock too
        self.results = ResultStore(client, settings.service.result_ttl_seconds, settings.service.trace_ttl_seconds,
                                   settings.cache.max_entries, settings.service.ttls(), self.clock,
                                   signing_key=settings.security.key())  # jobs are signed with it too
        self.queues = RQQueues(client, self.clock)
        self.replicas = ReplicaWait(client, settings.redis.min_replicas_acked, settings.redis.replica_ack_timeout_ms)
        self.store = store_client(settings, client)  # where the namespaces' versions are
        self.conversations = Conversations(self)
        self._fingerprint = answer_fingerprint(settings)

    def memory_version(self, namespace: str) -> int:
        """The namespace's memory version now (bumped by every write)."""
        return int(self.store.get(keys.memory_version(namespace)) or 0)

    def prefetch(self, namespace: str, conversation: str, query: str, **fields: Any) -> JobHandle:
        """Enqueue a prefetch for ``conversation``; older ones still queued are superseded
        (``producer.conversations``)."""
        return self.conversations.prefetch(namespace, conversation, query, **fields)

    def context_for(self, namespace: str, conversation: str) -> ConversationContext | None:
        """The conversation's freshest finished prefetch, its age and whether memories changed since."""
        return self.conversations.context_for(namespace, conversation)

    def _deadline(self, request: RetrievalRequest) -> float:
        if request.deadline_seconds is not None:
            return request.deadline_seconds
        service = self.settings.service
        return service.prefetch_deadline_seconds if request.queue == "prefetch" else service.batch_deadline_seconds


    def _existing(self, request: RetrievalRequest, job_id: str) -> JobHandle | None:
        raw = self.client.get(keys.request_job(request.namespace, request.request_id or ""))
        if raw is None:
            return None
        claim = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        trace_id, _, digest = claim.partition(":")
        if digest and digest != _request_digest(request):
            raise InvalidRequest("request_id", f"{request.request_id!r} was already used for a different request "
                                               "(its query, filters or options differ); the same request "
                                               "again is one job, another one needs a new id")
        # A job RQ ended (failed, stopped, cancelled, even finished) without a Ferret result is lost.
        if self.results.exists(job_id) or self.queues.live(job_id):
            return JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id, True)
        return None  # claimed but lost (never enqueued, or ended by RQ with no result): enqueue again

    def enqueue(self, request: RetrievalRequest | dict[str, Any]) -> JobHandle:
        """Validate and enqueue; raises InvalidRequest naming the bad field."""
        request = parse_request(request, self.settings.limits)
        backend = self.settings.backend
        if backend.kind == "nous" and backend.nous.url_for(request.namespace) is None:
            raise InvalidRequest("namespace", f"no Nous server serves {request.namespace!r} "
                                              "(backend.nous.namespaces maps namespaces to servers)")
        job_id = job_id_for(request.namespace, request.request_id)
        deadline = self._deadline(request)
        trace_id = new_trace_id()
        if request.request_id is not None:
            claim = keys.request_job(request.namespace, request.request_id)
            ttl = int(deadline + self.settings.service.ttls()[request.queue][0]) + 1
            claimed = f"{trace_id}:{_request_digest(request)}"
            if not self.client.set(claim, claimed, nx=True, ex=ttl):
                existing = self._existing(request, job_id)
                if existing is not None:
                    return existing
                self.client.set(claim, claimed, ex=ttl)
            elif self.results.exists(job_id):  # a final result outlived its claim: it is still the answer
                return JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id, True)
        version = self.memory_version(request.namespace)
        if (request.request_id is None and request.queue == "prefetch" and self.settings.cache.coalesce
                and request.options.cache):
            joined = self._coalesce(request, job_id, version, deadline)
            if joined is not None:
                return joined
        # The job sees every memory write that finished before now (the version read above).
        envelope = self._put(request, job_id, deadline, version, trace_id)
        return JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id,
                         deadline_at=envelope.deadline_at, request=request)

    def _put(self, request: RetrievalRequest, job_id: str, deadline: float, version: int,
             trace_id: str) -> JobEnvelope:
        """Put the job on its queue (and on enough replicas, when asked)."""
        envelope = JobEnvelope.new(request, deadline, memory_version=version, trace_id=trace_id,
                                   now=self.clock.time())
        payload = envelope.to_payload()
        if self.results.signing_key is not None:
            payload = sign_job(self.results.signing_key, job_id, payload)
        self.queues.enqueue(request.queue, payload, job_id,
                            timeout=max(1, int(deadline + self.settings.service.hard_timeout_grace_seconds + 0.999)),
                            failure_ttl=self.settings.service.ttls()[request.queue][0])
        self.replicas(f"the enqueue of job {job_id}")
        return envelope

    def _lost(self, job: JobHandle) -> bool:
        """The job is gone with no result (a failover lost its enqueue): RQ has no
        live job under its id. Checked in that order, so a job that finished in
        between is seen by its result."""
        return not self.queues.live(job.job_id) and not self.results.exists(job.job_id)

    def _enqueue_again(self, job: JobHandle) -> None:
        """The same request under the same job id and trace id, with the time its deadline leaves
        (none left: it ends ``expired`` when a worker takes it)."""
        assert job.request is not None
        left = max(0.0, job.deadline_at - self.clock.time()) if job.deadline_at is not None \
            else self._deadline(job.request)
        version = self.memory_version(job.namespace)
        self._put(job.request, job.job_id, left, version, job.trace_id)
        logger.warning("job %s was lost with no result (a Redis failover?): enqueued again", job.job_id)

    def _coalesce(self, request: RetrievalRequest, job_id: str, version: int, deadline: float) -> JobHandle | None:
        """The handle of an identical prefetch job still in flight, if any; else claim the slot."""
        slot = inflight_key(cache_key(request, self.settings.backend.kind, version, self._fingerprint))
        if self.client.set(slot, job_id, nx=True, px=max(1, int(deadline * 1000))):
            return None
        other = self.client.get(slot)
        other_id = other.decode() if isinstance(other, bytes) else str(other)
        if other is None or self.results.exists(other_id) or not self.queues.exists(other_id):
            self.client.set(slot, job_id, px=max(1, int(deadline * 1000)))
            return None
        return JobHandle(other_id, request.queue, request.namespace, None, "", duplicate=True, coalesced=True)

    def result(self, job: JobHandle | str) -> RetrievalResult | None:
        return self.results.read(job if isinstance(job, str) else job.job_id)

    def wait(self, job: JobHandle | str, timeout: float) -> RetrievalResult:
        """The final result, blocking (no polling) until it exists; ResultTimeout
        (a TimeoutError, carrying RQ's state of the job) once ``timeout`` passes.

        Redis out of reach (past the client's own retries) is waited out within
        ``timeout``: said once when it starts and once when it ends; still out of
        reach when the time is up, ``RedisUnreachable``."""
        job_id = job if isinstance(job, str) else job.job_id
        check = self.settings.redis.failover_check_seconds
        watch = isinstance(job, JobHandle) and job.request is not None and check > 0
        until = time.monotonic() + timeout
        away_since: float | None = None
        found: RetrievalResult | None = None
        while True:
            left = max(0.0, until - time.monotonic())
            try:
                found = self.results.wait(job_id, min(left, check) if watch else left)
                if found is None and watch and left > check:
                    assert isinstance(job, JobHandle)
                    if self._lost(job):
                        self._enqueue_again(job)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if away_since is None:
                    away_since = time.monotonic()
                    logger.warning("Redis is out of reach while waiting for job %s (%s); still waiting", job_id, exc)
                time.sleep(min(1.0, max(0.0, until - time.monotonic())))
            else:
                if away_since is not None:
                    logger.warning("Redis answers again after %.1f s; waiting for job %s",
                                   time.monotonic() - away_since, job_id)
                    away_since = None
            if found is not None or until - time.monotonic() <= 0:
                break
        if found is None and away_since is not None:
            raise RedisUnreachable(f"Redis was out of reach for the last {time.monotonic() - away_since:.0f} s "
                                   f"of the {timeout:g} s waited for job {job_id}")
        if found is None:
            state = self.queues.state(job_id)
            origin = job.queue if isinstance(job, JobHandle) else self.queues.origin(job_id)
            workers = self.workers_serving(origin) if origin else None
            raise ResultTimeout(job_id, timeout, state, workers)
        if isinstance(job, JobHandle):
            _check_owner(found, job)
        return found

    def workers_serving(self, queue: str) -> int:
        """How many workers listen on ``queue`` now (0: a job there waits for one)."""
        return workers_serving(self.client, queue)

    def status(self, job: JobHandle | str) -> JobState:
        """Ferret's final status and RQ's state of the job, as two fields."""
        job_id = job if isinstance(job, str) else job.job_id
        found = self.results.read(job_id)
        return JobState(job_id, found.status if found is not None else None, self.queues.state(job_id))

    def trace(self, job: JobHandle | str) -> dict[str, Any]:
        job_id = job if isinstance(job, str) else job.job_id
        found = self.results.read(job_id)
        if found is None or found.trace_id is None:
            raise JobNotFound(f"no finished job {job_id}")
        trace = self.results.trace(found.trace_id)
        if trace is None:
            raise JobNotFound(f"no trace for job {job_id} (expired, not sampled: tracing.redis_sample_rate, "
                              "or the job failed before tracing)")
        return trace
