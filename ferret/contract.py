"""The job contract shared by producer and worker: request and result.

Validation happens twice: at the producer (before anything reaches Redis)
and again at the worker (a payload may have been written onto a queue by
something else). Both raise ``InvalidRequest`` naming the field.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator

from ferret.errors import InvalidRequest
from ferret.records import Filters, encodable_text, without_control_characters
from ferret.settings import LimitSettings
from ferret.stats import JobStats

JOB_FUNCTION = "ferret.rq_layer.entry.run_retrieval"
# The same function's name before Ferret installed under one import root: jobs a producer of that version put
# on a queue are still Ferret's, and run as JOB_FUNCTION.
FORMER_JOB_FUNCTIONS: frozenset[str] = frozenset({"rq_wing.entry.run_retrieval"})

Queue = Literal["prefetch", "batch"]
Status = Literal["ok", "partial", "expired", "failed"]
FINAL_STATUSES: tuple[str, ...] = ("ok", "partial", "expired", "failed")
QUEUES: tuple[str, ...] = ("prefetch", "batch")

NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # fullmatch: "$" would let a trailing newline in
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class RetrievalOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_results: int | None = Field(None, ge=1)
    rerank: bool = False
    format: Literal["text", "none"] = "text"
    recall: Literal["auto", "explicit"] = "auto"  # explicit: asked for by the agent (stronger co-retrieval)
    cache: bool = True  # false: neither read nor write the retrieval cache, nor join an identical job in flight
    agent: bool = False  # run the agent loop (when agent.enabled), whatever the route
    # Recency and diversity for this request (pipeline.recency_half_life_days and pipeline.diversity)
    recency_half_life_days: float | None = Field(None, gt=0, le=36_500)
    diversity: float | None = Field(None, ge=0, le=1)


def _clean_text(value: str) -> str:
    return encodable_text(without_control_characters(value))


class Turn(BaseModel):
    """One earlier message of the conversation (``history``): a plain string
    is a user's message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"] = "user"
    content: str

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        return _clean_text(value)


class RetrievalRequest(BaseModel):
    """What a producer asks for. ``deadline_seconds`` is relative to enqueue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: str
    namespace: str = "default"
    filters: Filters = Filters()
    request_id: str | None = None
    queue: Queue = "prefetch"
    deadline_seconds: float | None = Field(None, gt=0)
    options: RetrievalOptions = RetrievalOptions()
    # The last turns of the conversation, oldest first: "it", "the other one" in the query are resolved from them.
    history: tuple[Turn, ...] = ()

    @field_validator("query")
    @classmethod
    def _query_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return _clean_text(value)

    @field_validator("history", mode="before")
    @classmethod
    def _turns(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [{"content": turn} if isinstance(turn, str) else turn for turn in value]
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not NAMESPACE_PATTERN.fullmatch(value):
            raise ValueError("use letters, digits, '_', '.', '-' (starting with a letter or digit)")
        return value

    @field_validator("request_id")
    @classmethod
    def _request_id(cls, value: str | None) -> str | None:
        if value is not None and not REQUEST_ID_PATTERN.fullmatch(value):
            raise ValueError("use letters, digits, '_', '.', ':', '-' (starting with a letter or digit)")
        return value


def _first_error(exc: ValidationError) -> InvalidRequest:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "request"
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    return InvalidRequest(field, message)


def _check_limits(request: RetrievalRequest, limits: LimitSettings) -> None:
    if len(request.query) > limits.max_query_chars:
        raise InvalidRequest("query", f"is {len(request.query)} characters, the limit is {limits.max_query_chars}")
    if len(request.namespace) > limits.max_namespace_chars:
        raise InvalidRequest("namespace", f"is longer than {limits.max_namespace_chars} characters")
    if request.request_id and len(request.request_id) > limits.max_request_id_chars:
        raise InvalidRequest("request_id", f"is longer than {limits.max_request_id_chars} characters")
    if request.deadline_seconds is not None and request.deadline_seconds > limits.max_deadline_seconds:
        raise InvalidRequest("deadline_seconds", f"must be at most {limits.max_deadline_seconds:g}")
    if len(request.history) > limits.max_history_turns:
        raise InvalidRequest("history", f"has {len(request.history)} turns, the limit is {limits.max_history_turns}")
    for number, turn in enumerate(request.history):
        if len(turn.content) > limits.max_history_turn_chars:
            raise InvalidRequest(f"history.{number}.content", f"is {len(turn.content)} characters, the limit is "
                                 f"{limits.max_history_turn_chars}")
    wanted = request.options.max_results
    if wanted is not None and wanted > limits.max_results:
        raise InvalidRequest("options.max_results", f"must be at most {limits.max_results}")


def parse_request(data: Any, limits: LimitSettings) -> RetrievalRequest:
    """Validate a request (a dict, a model, or JSON text); raise InvalidRequest."""
    if isinstance(data, RetrievalRequest):
        request = data
    else:
        text_limit = limits.max_query_chars + limits.max_history_turns * limits.max_history_turn_chars
        if isinstance(data, (str, bytes)) and len(data) > 4 * text_limit + 65_536:
            raise InvalidRequest("request", "payload is too large")
        try:
            if isinstance(data, (str, bytes)):
                request = RetrievalRequest.model_validate_json(data)
            elif isinstance(data, dict):
                request = RetrievalRequest.model_validate(data)
            else:
                raise InvalidRequest("request", f"must be an object, not {type(data).__name__}")
        except ValidationError as exc:
            raise _first_error(exc) from None
    _check_limits(request, limits)
    return request


class ResultItem(BaseModel):
    id: str
    score: float
    original_score: float
    section: str
    subtype: str | None
    sub_query: int
    sub_query_text: str | None
    title: str
    preview: str
    date: str | None
    rerank_score: float | None = None
    superseded_by: str | None = None
    """The id of the memory that replaces this one (it ranks just above it): this one is no longer current."""


class Timestamps(BaseModel):
    enqueued_at: float
    deadline_at: float
    started_at: float | None = None
    finished_at: float | None = None


class RetrievalResult(BaseModel):
    """The final answer for one request, stored as JSON in Redis."""

    job_id: str
    request_id: str | None = None
    namespace: str
    queue: str
    status: Status
    error: str | None = None
    results: list[ResultItem] = []
    context: str = ""
    stats: JobStats = JobStats()
    timestamps: Timestamps
    trace_id: str | None = None
    worker: str | None = None

    @field_serializer("stats")
    def _stats_as_stored(self, stats: JobStats) -> dict[str, Any]:
        return stats.to_json()
