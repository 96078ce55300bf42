"""What a producer does, once for both clients: ids, claims, coalescing, deadlines.

Each rule is a ``ferret.steps`` generator: ``Producer`` (blocking) and
``AsyncProducer`` (asyncio) run the same rules with their own I/O, so the
two cannot drift apart.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ferret import keys
from ferret.cache import answer_fingerprint, cache_key, inflight_key
from ferret.contract import RetrievalRequest, RetrievalResult, Timestamps, parse_request
from ferret.envelope import JobEnvelope
from ferret.errors import ForeignResult, InvalidRequest, JobNotFound, RedisUnreachable, RequestIdTaken, ResultTimeout
from ferret.job_ids import job_id_for
from ferret.producer.put_script import Claim, ConversationPush, Put, put_job
from ferret.results import read_result, read_trace, result_exists
from ferret.rq_layer.producer_side import EnqueueCommands, job_live, job_origin, job_state, workers_serving_step
from ferret.settings import Settings
from ferret.signing import sign_job
from ferret.steps import Call, Now, Replicate, Step, text
from ferret.tracing import new_trace_id

logger = logging.getLogger(__name__)

# Makes a conversation's entry for a job being put (its id and envelope), to push in the same round trip.
Conversation = Callable[[str, JobEnvelope], ConversationPush]


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
    # The namespace's memory version the job runs at (it sees every write before it); known for a job
    # this call enqueued or joined, None for one enqueued by an earlier call under the same request id.
    memory_version: int | None = None
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


def job_id_of(job: JobHandle | str) -> str:
    return job if isinstance(job, str) else job.job_id


def request_digest(request: RetrievalRequest) -> str:
    """What makes two requests under one request id the same request."""
    fields = {"query", "filters", "options", "queue"} | ({"history"} if request.history else set())
    material = request.model_dump(mode="json", include=fields)
    if not request.options.agent:  # as before the option existed: the same request, the same digest
        material["options"].pop("agent")
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def check_owner(found: RetrievalResult, job: JobHandle) -> None:
    """The result is the one asked for: its job id (checked on read), namespace and request id."""
    if found.namespace != job.namespace or (job.request_id is not None and found.request_id != job.request_id):
        raise ForeignResult(job.job_id, f"names namespace {found.namespace[:64]!r} and request "
                                        f"{(found.request_id or '')[:64]!r}, not the ones asked for")


# What a producer can do about each refusal its workers report (``ProducerRules.refused``).
REFUSAL_HINTS = {
    "bad_signature": "the producer's signing key differs from the workers' (security.signing_key or "
                     "signing_key_file must be the same on every producer and worker)",
    "malformed_job": "the producer and the workers may run Ferret versions that do not understand each other's "
                     "jobs, or the job was changed in Redis",
    "tenant_mismatch": "the job was changed in Redis after it was enqueued",
}


def refusal_record(raw: Any) -> dict[str, str] | None:
    """A refusal record read from Redis (untrusted): reason, message and trace id as text, or None."""
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("reason", "message", "trace_id")):
        return None
    return {"reason": data["reason"][:40], "message": data["message"][:300], "trace_id": data["trace_id"][:64]}


class RedisAway:
    """A wait's spells of Redis out of reach (both clients' ``wait``): said once when one starts and once
    when it ends; still out of reach when the time is up, ``unreachable`` is the error to raise."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.since: float | None = None  # monotonic

    def failed(self, exc: Exception) -> None:
        if self.since is None:
            self.since = time.monotonic()
            logger.warning("Redis is out of reach while waiting for job %s (%s); still waiting", self.job_id, exc)

    def answered(self) -> None:
        if self.since is not None:
            logger.warning("Redis answers again after %.1f s; waiting for job %s",
                           time.monotonic() - self.since, self.job_id)
            self.since = None

    def unreachable(self, timeout: float) -> RedisUnreachable | None:
        if self.since is None:
            return None
        return RedisUnreachable(f"Redis was out of reach for the last {time.monotonic() - self.since:.0f} s "
                                f"of the {timeout:g} s waited for job {self.job_id}")


class ProducerRules:
    """The producer's rules for one ``Settings``, as steps."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.signing_key = settings.security.key()  # jobs are signed with it, results checked with it
        self.enqueue_commands = EnqueueCommands.shared()
        self._fingerprint = answer_fingerprint(settings)

    # -- reading ------------------------------------------------------------------------------
    def memory_version(self, namespace: str) -> Step[int]:
        """The namespace's memory version now (bumped by every write)."""
        return int((yield Call(("GET", keys.memory_version(namespace)), on="store")) or 0)

    def result(self, job: JobHandle | str) -> Step[RetrievalResult | None]:
        return (yield from read_result(job_id_of(job), self.signing_key))

    def owned_result(self, job: JobHandle | str) -> Step[RetrievalResult | None]:
        """The result, checked to be the handle's (namespace and request id) when given a handle."""
        found = yield from self.result(job)
        if found is not None and isinstance(job, JobHandle):
            check_owner(found, job)
        return found

    def status(self, job: JobHandle | str) -> Step[JobState]:
        """Ferret's final status and RQ's state of the job, as two fields. RQ's state is read first: a job's
        result is written before RQ forgets the job, so a job that ends between the two reads is seen with
        its result. Read the other way round, it was seen with neither (no result yet, no RQ job any more):
        a job that had just finished looked like no job at all."""
        job_id = job_id_of(job)
        state = yield from job_state(job_id)
        found = yield from self.result(job_id)
        return JobState(job_id, found.status if found is not None else None, state)

    def trace(self, job: JobHandle | str) -> Step[dict[str, Any]]:
        job_id = job_id_of(job)
        found = yield from self.result(job_id)
        if found is None or found.trace_id is None:
            raise JobNotFound(f"no finished job {job_id}")
        trace = yield from read_trace(found.trace_id)
        if trace is None:
            raise JobNotFound(f"no trace for job {job_id} (expired, not sampled: tracing.redis_sample_rate, "
                              "or the job failed before tracing)")
        return trace

    def timed_out(self, job: JobHandle | str, timeout: float) -> Step[ResultTimeout]:
        """The error for a wait that ran out: RQ's state of the job and who serves its queue."""
        job_id = job_id_of(job)
        state = yield from job_state(job_id)
        origin = job.queue if isinstance(job, JobHandle) else (yield from job_origin(job_id))
        workers = (yield from workers_serving_step(origin)) if origin else None
        return ResultTimeout(job_id, timeout, state, workers)

    def lost(self, job: JobHandle) -> Step[bool]:
        """The job is gone with no result (a failover lost its enqueue): RQ has no
        live job under its id. Checked in that order, so a job that finished in
        between is seen by its result."""
        if (yield from job_live(job.job_id)):
            return False
        return not (yield from result_exists(job.job_id))

    def refused(self, job: JobHandle) -> Step[RetrievalResult | None]:
        """The ``failed`` end of a lost job that the workers refused, with the reason and what to do: only
        when the refusal names this job's own trace id (``keys.refusal``), or the job is one this request
        joined, else None."""
        raw = yield Call(("GET", keys.refusal(job.job_id)))
        said = refusal_record(raw)
        # A joined job's id is another request's one-off id: a refusal under it is that job's.
        if said is None or not (job.coalesced or (job.trace_id and said["trace_id"] == job.trace_id)):
            return None
        now = yield Now()
        hint = REFUSAL_HINTS.get(said["reason"], "")
        error = f"refused by the workers ({said['reason']}): {said['message']}" + (f"; {hint}" if hint else "")
        return RetrievalResult(job_id=job.job_id, request_id=job.request_id, namespace=job.namespace,
                               queue=job.queue, status="failed", error=error[:1000],
                               trace_id=job.trace_id or said["trace_id"],
                               timestamps=Timestamps(enqueued_at=now, deadline_at=job.deadline_at or now,
                                                     finished_at=now))

    # -- enqueueing ---------------------------------------------------------------------------
    def deadline(self, request: RetrievalRequest) -> float:
        if request.deadline_seconds is not None:
            return request.deadline_seconds
        service = self.settings.service
        return service.prefetch_deadline_seconds if request.queue == "prefetch" else service.batch_deadline_seconds

    def valid(self, request: RetrievalRequest | dict[str, Any]) -> RetrievalRequest:
        """The request, validated; ``InvalidRequest`` naming the bad field."""
        request = parse_request(request, self.settings.limits)
        backend = self.settings.backend
        if backend.kind == "nous" and backend.nous.url_for(request.namespace) is None:
            raise InvalidRequest("namespace", f"no Nous server serves {request.namespace!r} "
                                              "(backend.nous.namespaces maps namespaces to servers)")
        return request

    def enqueue(self, request: RetrievalRequest | dict[str, Any]) -> Step[JobHandle]:
        """Validate and enqueue; raises InvalidRequest naming the bad field."""
        handle, _pushed = yield from self.enqueue_with(request)
        return handle

    def enqueue_with(self, request: RetrievalRequest | dict[str, Any],
                     conversation: Conversation | None = None) -> Step[tuple[JobHandle, list[bytes] | None]]:
        """``enqueue``, and when this call puts the job, the entry ``conversation`` makes of it pushed in the
        same round trip; with the handle, the conversation's earlier entries still queued (None: no entry
        was pushed, as when the job was there already or another prefetch's was joined)."""
        request = self.valid(request)
        job_id = job_id_for(request.namespace, request.request_id)
        deadline = self.deadline(request)
        trace_id = new_trace_id()
        if request.request_id is not None:
            claim = keys.request_job(request.namespace, request.request_id)
            ttl = self.claim_ttl(request, deadline)
            claimed = f"{trace_id}:{request_digest(request)}"
            if not (yield Call(("SET", claim, claimed, "NX", "EX", ttl))):
                existing = yield from self._existing(request, job_id)
                if existing is not None:
                    return existing, None
                yield Call(("SET", claim, claimed, "EX", ttl))
            elif (yield from result_exists(job_id)):  # a final result outlived its claim: it is still the answer
                return JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id, True), None
        version = yield from self.memory_version(request.namespace)
        # The job sees every memory write that finished before now (the version read above).
        slot = None
        if (request.request_id is None and request.queue == "prefetch" and self.settings.cache.coalesce
                and request.options.cache):
            # The twin check's slot is claimed in the put's own round trip; held, the holder is looked at.
            slot = Claim(inflight_key(cache_key(request, self.settings.backend.kind, version, self._fingerprint)),
                         job_id, max(1, int(deadline * 1000)))
        envelope, put = yield from self.put(request, job_id, deadline, version, trace_id, slot, conversation)
        if slot is not None and not put.put:
            joined = yield from self._coalesce(request, slot, version)
            if joined is not None:
                return joined, None
            envelope, put = yield from self.put(request, job_id, deadline, version, trace_id, None, conversation)
        handle = JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id,
                           deadline_at=envelope.deadline_at, memory_version=version, request=request)
        return handle, put.queued

    def claim_ttl(self, request: RetrievalRequest, deadline: float) -> int:
        """How long a request id's claim lasts: its deadline, then as long as its result."""
        return int(deadline + self.settings.service.ttls()[request.queue][0]) + 1

    def hard_timeout(self, deadline: float) -> int:
        """RQ's hard time limit of a job with ``deadline`` seconds to run."""
        return max(1, int(deadline + self.settings.service.hard_timeout_grace_seconds + 0.999))

    def _existing(self, request: RetrievalRequest, job_id: str) -> Step[JobHandle | None]:
        claim = text((yield Call(("GET", keys.request_job(request.namespace, request.request_id or "")))))
        if claim is None:
            return None
        trace_id, _, digest = claim.partition(":")
        if digest and digest != request_digest(request):
            raise RequestIdTaken("request_id", f"{request.request_id!r} was already used for a different request "
                                               "(its query, filters or options differ); the same request "
                                               "again is one job, another one needs a new id")
        # A job RQ ended (failed, stopped, cancelled, even finished) without a Ferret result is lost.
        if (yield from result_exists(job_id)) or (yield from job_live(job_id)):
            return JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id, True)
        return None  # claimed but lost (never enqueued, or ended by RQ with no result): enqueue again

    def put(self, request: RetrievalRequest, job_id: str, deadline: float, version: int, trace_id: str,
            claim: Claim | None = None, conversation: Conversation | None = None) -> Step[tuple[JobEnvelope, Put]]:
        """Put the job on its queue (and on enough replicas, when asked), in one round trip with the in-flight
        slot's ``claim`` (held: nothing is put) and ``conversation``'s entry (``ferret.producer.put_script``)."""
        now = yield Now()
        envelope = JobEnvelope.new(request, deadline, memory_version=version, trace_id=trace_id, now=now)
        payload = envelope.to_payload()
        if self.signing_key is not None:
            payload = sign_job(self.signing_key, job_id, payload)
        service = self.settings.service
        commands = self.enqueue_commands(request.queue, payload, job_id, timeout=self.hard_timeout(deadline),
                                         failure_ttl=service.ttls()[request.queue][0], now=now)
        push = conversation(job_id, envelope) if conversation is not None else None
        put = yield from put_job(commands, claim, push)
        if put.put:
            yield Replicate(f"the enqueue of job {job_id}")
        return envelope, put

    def enqueue_again(self, job: JobHandle) -> Step[None]:
        """The same request under the same job id and trace id, with the time its deadline leaves
        (none left: it ends ``expired`` when a worker takes it)."""
        assert job.request is not None
        now = yield Now()
        left = max(0.0, job.deadline_at - now) if job.deadline_at is not None else self.deadline(job.request)
        version = yield from self.memory_version(job.namespace)
        yield from self.put(job.request, job.job_id, left, version, job.trace_id)
        logger.warning("job %s was lost with no result (a Redis failover?): enqueued again", job.job_id)

    def _coalesce(self, request: RetrievalRequest, slot: Claim, version: int) -> Step[JobHandle | None]:
        """The handle of the identical prefetch job in flight that holds ``slot`` (the put's claim found it
        held), if it is still in flight; else the slot is taken for this job (None)."""
        other_id = text((yield Call(("GET", slot.key))))
        # Only a job RQ may still run is joined: one it ended (refused by the workers, failed, stopped) would
        # leave its joiners waiting for a result that never comes; this request runs on its own instead.
        if other_id is None or (yield from result_exists(other_id)) or not (yield from job_live(other_id)):
            yield Call(("SET", slot.key, slot.value, "PX", slot.ttl_ms))
            return None
        # The slot's key holds the version: the job joined runs at this one.
        return JobHandle(other_id, request.queue, request.namespace, None, "", duplicate=True, coalesced=True,
                         memory_version=version)

