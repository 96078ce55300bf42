"""Building and writing a job's one final result, whatever happened to it:
run, or lost with its worker; and noting the entries refused instead (a
refusal writes nothing under the job id it names)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from ferret import keys
from ferret.carriers import NotACarrier, is_carrier, members_of
from ferret.contract import (
    NAMESPACE_PATTERN,
    REQUEST_ID_PATTERN,
    RetrievalRequest,
    RetrievalResult,
    Timestamps,
    parse_request,
)
from ferret.envelope import JobEnvelope, deadline_of, epoch_field
from ferret.errors import FerretError, InvalidRequest, JobRefused
from ferret.job_ids import binds
from ferret.repeated_lines import RepeatedLines
from ferret.results import WriteOutcome
from ferret.settings import LimitSettings
from ferret.tracing import SpanCollector, new_trace_id
from ferret.worker.core.resources import WorkerResources

logger = logging.getLogger(__name__)
_REFUSALS = RepeatedLines(logger)  # every refusal is in the refusal log and the metric; the log says a sample

NO_TRACE = "0" * 32  # the trace id of a result written without a trace


@dataclass
class Stamps:
    """What a result needs of its job, whether or not its payload was valid."""

    job_id: str
    enqueued_at: float
    deadline_at: float
    raw_request: Any = None  # ids are copied from it, when well formed, for an invalid request
    origin: str | None = None  # the RQ queue the job came from


def stamps_of(envelope: JobEnvelope, job_id: str) -> Stamps:
    return Stamps(job_id, envelope.enqueued_at, envelope.deadline_at)


def stamps_of_invalid(payload: Any, job_id: str, origin: str | None, now: float) -> Stamps:
    """Stamps read leniently from a payload that is not a valid envelope (its deadline: ``now``)."""
    data = payload if isinstance(payload, dict) else {}
    try:
        enqueued = epoch_field(data, "enqueued_at")
    except InvalidRequest:
        enqueued = now
    return Stamps(job_id, enqueued, now, data.get("request"), origin)


def _valid_or_none(value: Any, pattern: re.Pattern[str]) -> str | None:
    """An id copied from an invalid request only when it is well formed."""
    return value if isinstance(value, str) and len(value) <= 256 and pattern.fullmatch(value) else None


def _safe_text(text: str | None, limit: int = 1000) -> str | None:
    """Text that always encodes (input may carry lone surrogates), cut to ``limit``."""
    if text is None:
        return None
    return text.encode("utf-8", "replace").decode("utf-8")[:limit]


def build_result(ctx: WorkerResources, env: Stamps, request: RetrievalRequest | None, status: str,
            started_at: float, trace_id: str, **fields: Any) -> RetrievalResult:
    raw = env.raw_request if isinstance(env.raw_request, dict) else {}
    return RetrievalResult.model_construct(  # every field is built here, from validated input
        job_id=env.job_id,
        request_id=request.request_id if request else _valid_or_none(raw.get("request_id"), REQUEST_ID_PATTERN),
        namespace=request.namespace if request else (_valid_or_none(raw.get("namespace"), NAMESPACE_PATTERN) or "?"),
        queue=request.queue if request else (env.origin or "?"),
        status=status,  # type: ignore[arg-type]
        timestamps=Timestamps.model_construct(enqueued_at=env.enqueued_at, deadline_at=env.deadline_at,
                              started_at=started_at, finished_at=ctx.now()),
        trace_id=trace_id,
        worker=ctx.name,
        **{**fields, "error": _safe_text(fields.get("error"))},
    )


REFUSAL_LOG = keys.refusal_log()
REFUSAL_LOG_LENGTH = 1000
_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def trace_id_of(payload: Any) -> str | None:
    """The trace id a (refused, so untrusted) payload carries, when it is one a producer would make."""
    found = payload.get("trace_id") if isinstance(payload, dict) else None
    return found if isinstance(found, str) and _TRACE_ID.fullmatch(found) else None


def record_refusal(ctx: WorkerResources, job_id: str | None, queue: str, reason: str, message: str,
                   trace_id: str | None = None) -> JobRefused:
    """Note a refused entry: the newest ``REFUSAL_LOG_LENGTH`` refusals in one list (for operators), a
    log line, and, when the entry names a job id and carries a trace id, why it was refused under that id
    (``keys.refusal``): the producer waiting for that job reads it, and ends its wait ``failed`` with the
    reason, only when the job is gone with no result and the trace id is its own. No result is written
    under the id: whoever owns it may still send its request. Returns the refusal, for a caller that
    raises it."""
    entry = {"at": round(ctx.now(), 3), "queue": queue[:60], "job_id": (job_id or "")[:100], "reason": reason,
             "message": _safe_text(message, 300), "worker": ctx.name}
    with ctx.client.pipeline(transaction=True) as pipe:
        pipe.lpush(REFUSAL_LOG, json.dumps(entry))
        pipe.ltrim(REFUSAL_LOG, 0, REFUSAL_LOG_LENGTH - 1)
        if job_id and trace_id:
            said = {"reason": reason, "message": entry["message"], "trace_id": trace_id, "at": entry["at"]}
            pipe.set(keys.refusal(job_id), json.dumps(said), ex=ctx.settings.service.result_ttl_seconds)
        pipe.execute()
    _REFUSALS.warning(f"refused jobs ({reason})", "job=%s refused (%s): %s", job_id, reason, message)
    return JobRefused(reason, message)


_REFUSED = re.compile(r"JobRefused: refused by Ferret \((\w+)\)")


def refused_reason(job: Any) -> str | None:
    """Why RQ's job was refused by the job core (``JobRefused`` ended it), or None."""
    try:
        if job.get_status(refresh=True) != "failed":
            return None
        latest = job.latest_result()
    except Exception:  # a hash or result stream that cannot be read: not a refusal we know of
        return None
    found = _REFUSED.search(getattr(latest, "exc_string", None) or "")
    return found.group(1) if found else None


class ResultDropped(Exception):
    """The job's result was not kept: another run of the job stored one first."""

    def __init__(self, result: RetrievalResult) -> None:
        super().__init__(result.job_id)
        self.result = result


def trace_sampled(trace_id: str, rate: float) -> bool:
    """Whether a trace is among the ``rate`` share kept (by its id: the same answer on every worker)."""
    if rate >= 1:
        return True
    digest = hashlib.sha256(trace_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") < rate * 2**64


def trace_of(ctx: WorkerResources, result: RetrievalResult,
             tracer: SpanCollector) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The job's trace, and the same when it is stored with the result (not every ``ok`` job's is: the
    sample rate), else None."""
    trace = {"trace_id": tracer.trace_id, "job_id": result.job_id,
             "spans": [s.to_dict() for s in tracer.spans], "dropped_spans": tracer.dropped}
    kept = trace if result.status != "ok" or trace_sampled(tracer.trace_id, ctx.settings.tracing.redis_sample_rate) \
        else None
    return trace, kept


def dropped(result: RetrievalResult) -> ResultDropped:
    """A run's result that found the job's one result already stored (logged as dropped)."""
    logger.warning("job=%s finished %s here, but another run of it had stored its result first (this "
                   "worker was taken for lost and the job re-run): this result is dropped",
                   result.job_id, result.status)
    return ResultDropped(result)


def write_with_trace(ctx: WorkerResources, result: RetrievalResult, tracer: SpanCollector,
                     cache: tuple[str, bytes, int] | None,
                     body: bytes | None = None) -> tuple[RetrievalResult, dict[str, Any]]:
    """Write the result and its trace (``body``: the result's JSON, when it is at hand). A trace id is one
    job's: when the payload named one another job's trace already holds, the trace (and the result's
    pointer to it) move to a fresh id instead of overwriting it."""
    for _ in range(3):
        trace, kept = trace_of(ctx, result, tracer)
        outcome = ctx.results.write(result, kept, cache, body)
        if outcome is WriteOutcome.ALREADY_FINAL:
            raise dropped(result)
        if outcome is not WriteOutcome.TRACE_TAKEN:
            return result, trace
        logger.warning("job=%s trace id %s belongs to another job; using a new one", result.job_id, tracer.trace_id)
        tracer.trace_id = new_trace_id()
        for span in tracer.spans:
            span.trace_id = tracer.trace_id
        result, body = result.model_copy(update={"trace_id": tracer.trace_id}), None
    raise FerretError(f"job={result.job_id}: no free trace id after 3 tries")


def request_of(payload: Any, limits: LimitSettings) -> RetrievalRequest | None:
    """The request a payload carries, or None when it is not a valid envelope."""
    try:
        return JobEnvelope.parse(payload, limits).request
    except InvalidRequest:
        return None


def lost_result(ctx: WorkerResources, payload: Any, job_id: str, origin: str | None,
                reason: str, status: str = "failed") -> RetrievalResult | None:
    """Write (once) the ``failed`` result of a job whose worker died under it (or another final ``status``:
    ``expired`` for one that never started); None, and nothing written, when its payload is not a request
    of the namespace its id names."""
    now = ctx.now()
    env = stamps_of_invalid(payload, job_id, origin, now)
    raw = env.raw_request if isinstance(env.raw_request, dict) else {}
    try:
        request = parse_request(raw, ctx.settings.limits)
    except InvalidRequest:
        request = None
    if request is None or not binds(job_id, request.namespace, request.request_id):
        record_refusal(ctx, job_id, origin or "?", "tenant_mismatch" if request else "malformed_job",
                       f"{reason}, and its payload is not a request of the namespace its id names: no result")
        return None
    deadline = deadline_of(payload)
    if deadline is not None:
        env.deadline_at = deadline
    result = build_result(ctx, env, request, status, now, NO_TRACE, error=reason)
    ctx.results.write(result, None)
    return ctx.results.read(job_id) or result




def lost_results(ctx: WorkerResources, payload: Any, job_id: str, origin: str | None,
                 reason: str, status: str = "failed") -> list[RetrievalResult]:
    """``lost_result``; for a carrier (``ferret.carriers``), that of each member without a result."""
    if not is_carrier(payload):
        lost = lost_result(ctx, payload, job_id, origin, reason, status)
        return [lost] if lost is not None else []
    try:
        members = members_of(payload)
    except NotACarrier as exc:
        record_refusal(ctx, job_id, origin or "?", "malformed_job", f"{reason}, and {exc}: no result")
        return []
    answered = ctx.results.answered([member_id for member_id, _ in members])
    written = []
    for member_id, member_payload in members:
        if member_id not in answered:
            lost = lost_result(ctx, member_payload, member_id, origin, reason, status)
            if lost is not None:
                written.append(lost)
    return written


def finished(ctx: WorkerResources, job_id: str, payload: Any) -> bool:
    """Whether a job has its result; a carrier, whether each of its members has (a carrier payload
    that is not one a producer makes is not: it is run, and refused)."""
    if not is_carrier(payload):
        return ctx.results.exists(job_id)
    try:
        members = [member_id for member_id, _ in members_of(payload)]
    except NotACarrier:
        return False
    return len(ctx.results.answered(members)) == len(members)
