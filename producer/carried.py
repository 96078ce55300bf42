"""A batch's lines put in carriers (``ferret.carriers``): ``service.batch_lines_per_job`` lines an RQ job.

``enqueue_carried`` takes a chunk of a batch's requests and answers, for each, its handle, the error that
refused it (``InvalidRequest`` naming the field), or None: not carried, to be enqueued the usual way
(``ProducerRules.enqueue``). Only a fresh line is carried: a batch-queue request with a request id whose
claim this call takes. A request id claimed already (a resumed batch, a repeated id: the usual way looks
at the job that holds it) or whose result outlived its claim is not. Three round trips for the chunk,
whatever its size:

1. every carried line's claim (``SET NX``, as ``enqueue`` sets it) and whether its result is there;
2. the namespaces' memory versions (the lines' jobs see every write before them);
3. one transaction: each member's ``keys.carried_by`` pointer to its carrier, then each carrier's RQ enqueue,
   RQ's own commands (``EnqueueCommands``).

The lines are sorted by deadline first, so a carrier's members have deadlines close together; a carrier's
hard time limit is its latest member's deadline plus the grace, as a job's is. A carrier is closed early when
one more line could take its data past what a worker inflates (``limits.job_data_cap()``, which has room for
the largest request alone): a carrier of long requests carries fewer of them. A crash between the claims
and the transaction leaves claims with no job: the usual way takes such a claim for lost and enqueues its
request again (a resumed batch).
"""

from __future__ import annotations

from typing import Any

import orjson

from ferret import keys
from ferret.carriers import carrier_payload, new_carrier_id
from ferret.contract import RetrievalRequest
from ferret.envelope import JobEnvelope
from ferret.errors import InvalidRequest
from ferret.job_ids import job_id_for
from ferret.producer.rules import JobHandle, ProducerRules, request_digest
from ferret.signing import sign_job
from ferret.steps import Batch, Now, Replicate, Step
from ferret.tracing import new_trace_id

Answer = JobHandle | Exception | None
# Room in a carrier's data (as the workers inflate it, capped at ``limits.job_data_cap()``) for what is not its
# members' payloads: its own fields, its signature, RQ's wrapping of the call (JSON punctuation a member).
CARRIER_OVERHEAD_BYTES = 64 * 1024


def enqueue_carried(rules: ProducerRules, requests: list[Any], per_job: int) -> Step[list[Answer]]:
    answers: list[Answer] = [None] * len(requests)
    if per_job < 2:  # carriers off: every request the usual way, validated there (once)
        return answers
    fresh: list[tuple[int, RetrievalRequest, str, float, str]] = []  # index, request, job id, deadline, trace id
    for index, raw in enumerate(requests):
        try:
            request = rules.valid(raw)
        except InvalidRequest as exc:
            answers[index] = exc
            continue
        if request.queue == "batch" and request.request_id is not None:
            fresh.append((index, request, job_id_for(request.namespace, request.request_id), rules.deadline(request),
                          new_trace_id()))
    if not fresh:
        return answers
    calls: list[tuple[Any, ...]] = []
    for _, request, job_id, deadline, trace_id in fresh:
        calls.append(("SET", keys.request_job(request.namespace, request.request_id or ""),
                      f"{trace_id}:{request_digest(request)}", "NX", "EX", rules.claim_ttl(request, deadline)))
        calls.append(("EXISTS", keys.result(job_id)))
    replies = yield Batch(tuple(calls))
    members = []
    for number, (index, request, job_id, _deadline, trace_id) in enumerate(fresh):
        claimed, answered = replies[2 * number], replies[2 * number + 1]
        if not claimed:
            continue  # held by an earlier job: the usual way looks at it
        if answered:  # a final result outlived its claim: it is still the answer (as ``enqueue`` says)
            answers[index] = JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id, True)
            continue
        members.append(fresh[number])
    if not members:
        return answers
    namespaces = sorted({request.namespace for _, request, *_ in members})
    read = yield Batch(tuple(("GET", keys.memory_version(name)) for name in namespaces), on="store")
    versions = {name: int(value or 0) for name, value in zip(namespaces, read, strict=True)}
    now = yield Now()
    members.sort(key=lambda member: member[3])
    writes: list[tuple[Any, ...]] = []
    room = rules.settings.limits.job_data_cap() - CARRIER_OVERHEAD_BYTES
    carried: list[tuple[str, dict[str, Any], float]] = []  # the carrier being filled: its members
    carrier_id, filled = new_carrier_id(), 0  # its id, its members' size
    for index, request, job_id, deadline, trace_id in members:
        version = versions[request.namespace]
        envelope = JobEnvelope.new(request, deadline, memory_version=version, trace_id=trace_id, now=now)
        payload = envelope.to_payload()
        size = json_size_bound(payload)
        if carried and (len(carried) == per_job or filled + size > room):
            writes.extend(_carrier_writes(rules, carrier_id, carried, now))
            carrier_id, carried, filled = new_carrier_id(), [], 0
        carried.append((job_id, payload, deadline))
        filled += size
        writes.append(("SET", keys.carried_by(job_id), carrier_id, "EX", rules.claim_ttl(request, deadline)))
        answers[index] = JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id,
                                   deadline_at=envelope.deadline_at, memory_version=version, request=request)
    writes.extend(_carrier_writes(rules, carrier_id, carried, now))
    yield Batch(tuple(writes), transaction=True)
    yield Replicate(f"the enqueue of {len(members)} batch lines")
    return answers


def _carrier_writes(rules: ProducerRules, carrier_id: str, carried: list[tuple[str, dict[str, Any], float]],
                    now: float) -> tuple[tuple[Any, ...], ...]:
    """RQ's enqueue of the carrier of ``carried`` (job id, payload, deadline in seconds), signed when signing
    is on; its hard time limit its latest member's deadline plus the grace."""
    payload = carrier_payload([(job_id, member) for job_id, member, _ in carried])
    if rules.signing_key is not None:
        payload = sign_job(rules.signing_key, carrier_id, payload)
    latest = max(deadline for _, _, deadline in carried)
    return rules.enqueue_commands("batch", payload, carrier_id, timeout=rules.hard_timeout(latest),
                                  failure_ttl=rules.settings.service.ttls()["batch"][0], now=now)


def json_size_bound(payload: dict[str, Any]) -> int:
    """At least the bytes of ``payload`` in RQ's JSON (``json.dumps``, every non-ASCII character escaped:
    a character of 2-4 bytes in UTF-8 becomes 6 or 12), from its compact UTF-8 JSON: three times that when
    it is not all ASCII."""
    compact = orjson.dumps(payload)
    return len(compact) if compact.isascii() else 3 * len(compact)
