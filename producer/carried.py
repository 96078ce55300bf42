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
hard time limit is its latest member's deadline plus the grace, as a job's is. A crash between the claims
and the transaction leaves claims with no job: the usual way takes such a claim for lost and enqueues its
request again (a resumed batch).
"""

from __future__ import annotations

from typing import Any

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


def enqueue_carried(rules: ProducerRules, requests: list[Any], per_job: int) -> Step[list[Answer]]:
    answers: list[Answer] = [None] * len(requests)
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
    if per_job < 2 or not fresh:
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
    service = rules.settings.service
    writes: list[tuple[Any, ...]] = []
    for start in range(0, len(members), per_job):
        carrier_id = new_carrier_id()
        carried = []
        for index, request, job_id, deadline, trace_id in members[start:start + per_job]:
            version = versions[request.namespace]
            envelope = JobEnvelope.new(request, deadline, memory_version=version, trace_id=trace_id, now=now)
            carried.append((job_id, envelope.to_payload()))
            writes.append(("SET", keys.carried_by(job_id), carrier_id, "EX", rules.claim_ttl(request, deadline)))
            answers[index] = JobHandle(job_id, request.queue, request.namespace, request.request_id, trace_id,
                                       deadline_at=envelope.deadline_at, memory_version=version, request=request)
        payload = carrier_payload(carried)
        if rules.signing_key is not None:
            payload = sign_job(rules.signing_key, carrier_id, payload)
        latest = max(deadline for _, _, _, deadline, _ in members[start:start + per_job])
        writes.extend(rules.enqueue_commands("batch", payload, carrier_id, timeout=rules.hard_timeout(latest),
                                             failure_ttl=service.ttls()["batch"][0], now=now))
    yield Batch(tuple(writes), transaction=True)
    yield Replicate(f"the enqueue of {len(members)} batch lines")
    return answers
