"""The job envelope: what goes on the queue for one request.

Built in one place (``JobEnvelope.new``, by the producer and by ``ferret
run``) and parsed once (``JobEnvelope.parse``, by the worker), so the two
sides cannot disagree about what a job carries. The payload is JSON: the
request, when it was enqueued, its deadline (both epoch seconds), the trace
id the producer handed out, and the memory version the producer saw.

Parsing treats the payload as untrusted: a malformed request, or times that
are not finite numbers, raise ``InvalidRequest`` naming the field; a trace id
or memory version that is not of the producer's form is dropped (a trace id
names a Redis key, so only 32 lowercase hex digits are taken).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any

from ferret.contract import RetrievalRequest, parse_request
from ferret.errors import InvalidRequest
from ferret.settings import LimitSettings
from ferret.tracing import new_trace_id

_TRACE_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class JobEnvelope:
    request: RetrievalRequest
    enqueued_at: float
    deadline_at: float
    trace_id: str | None = None
    memory_version: int | None = None  # None: the worker reads the store's version itself

    @classmethod
    def new(cls, request: RetrievalRequest, deadline_seconds: float, memory_version: int | None = None,
            trace_id: str | None = None, now: float | None = None) -> JobEnvelope:
        """The envelope of a request enqueued now, with a fresh trace id unless given."""
        now = time.time() if now is None else now
        return cls(request, now, now + deadline_seconds, trace_id or new_trace_id(), memory_version)

    def to_payload(self) -> dict[str, Any]:
        """The JSON object that goes on the queue."""
        payload: dict[str, Any] = {
            "request": self.request.model_dump(mode="json", exclude_none=True),
            "enqueued_at": self.enqueued_at,
            "deadline_at": self.deadline_at,
        }
        if self.trace_id is not None:
            payload["trace_id"] = self.trace_id
        if self.memory_version is not None:
            payload["memory_version"] = self.memory_version
        return payload

    @classmethod
    def parse(cls, payload: Any, limits: LimitSettings) -> JobEnvelope:
        """The envelope a payload carries; ``InvalidRequest`` naming the field if it carries none."""
        if not isinstance(payload, dict):
            raise InvalidRequest("payload", f"must be an object, not {type(payload).__name__}")
        enqueued_at, deadline_at = epoch_field(payload, "enqueued_at"), epoch_field(payload, "deadline_at")
        trace_id = payload.get("trace_id")
        version = payload.get("memory_version")
        return cls(
            request=parse_request(payload.get("request"), limits),
            enqueued_at=enqueued_at,
            deadline_at=deadline_at,
            trace_id=trace_id if isinstance(trace_id, str) and _TRACE_ID.fullmatch(trace_id) else None,
            memory_version=version if isinstance(version, int) and not isinstance(version, bool)
            and version >= 0 else None,
        )


def epoch_field(payload: dict[str, Any], name: str) -> float:
    """A payload's time field as epoch seconds; ``InvalidRequest`` unless a finite number."""
    value = payload.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(f"payload.{name}", "must be a finite number (epoch seconds)")
    return float(value)


def deadline_of(payload: Any) -> float | None:
    """A possibly invalid payload's deadline, or None when it has no valid one
    (for the reaper and for the results of jobs that never ran)."""
    try:
        return epoch_field(payload, "deadline_at") if isinstance(payload, dict) else None
    except InvalidRequest:
        return None
