"""The HTTP API's operations, one per route, each a call of the shared ``AsyncClient`` (the Python
client's own): the same validation, ids, waits and errors. Waiting holds no thread: every waiter shares
the client's one subscriber connection (``ferret.producer.done_hub``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, create_model

from ferret.contract import RetrievalRequest, RetrievalResult, Turn
from ferret.errors import JobNotFound
from ferret.producer.api import AsyncClient
from ferret.producer.rules import JobHandle
from ferret.records import Memory
from ferret.serve.access import Action, needs

MEMORY_ID = r"^[^\x00-\x1f\x7f-\x9f]*$"  # no memory's id has a control character: none is forgotten by one
WAIT_GRACE_SECONDS = 5.0  # a query waits for its deadline plus this, unless it says otherwise

NamespacePath = Annotated[str, Path(min_length=1, max_length=256, description="The namespace the key reaches.")]
JobPath = Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
ConversationPath = Annotated[str, Path(min_length=1, max_length=256)]

_REQUEST_FIELDS: dict[str, Any] = {name: (field.annotation, field) for name, field
                                   in RetrievalRequest.model_fields.items() if name != "namespace"}
JobBody = create_model("JobBody", __config__=ConfigDict(extra="forbid"), **_REQUEST_FIELDS)  # type: ignore[call-overload]
QueryBody = create_model(  # type: ignore[call-overload]
    "QueryBody", __config__=ConfigDict(extra="forbid"), **_REQUEST_FIELDS,
    wait_seconds=(float | None, Field(None, gt=0, description="Seconds to wait for the result (default: the "
                                      "job's deadline and 5 s; at most http.max_wait_seconds).")))


class Enqueued(BaseModel):
    job_id: str
    queue: str
    joined_identical_request: bool
    deadline_at: float | None


class JobView(BaseModel):
    job_id: str
    status: str | None = Field(description="Ferret's final status; null until there is one.")
    rq_state: str | None = Field(description="RQ's state of the job (queued, started, ...); null if RQ has none.")
    result: RetrievalResult | None = None


class PrefetchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(description="What the next turn will likely need.")
    history: tuple[Turn, ...] = ()
    deadline_seconds: float | None = Field(None, gt=0)


class ContextView(BaseModel):
    ready: bool
    context: str | None = None
    job_id: str | None = None
    status: str | None = None
    results: list[dict[str, Any]] = []
    age_seconds: float | None = None
    stale: bool | None = Field(None, description="Memories were written since it was enqueued.")
    newer_pending: bool | None = None


class MemoriesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    memories: list[Memory] = Field(min_length=1, max_length=1000,
                                           description="Memories (Ferret's memory fields); an existing id is "
                                                       "replaced.")


class ForgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[Annotated[str, Field(min_length=1, max_length=256, pattern=MEMORY_ID)]] = Field(min_length=1,
                                                                                             max_length=1000)


def _ferret(request: Request) -> AsyncClient:
    return request.app.state.ferret  # type: ignore[no-any-return]


def _json(model: BaseModel) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


def _enqueued(handle: JobHandle) -> Response:
    """202 and the job's handle, as a client reads it back."""
    return Response(Enqueued(job_id=handle.job_id, queue=handle.queue, deadline_at=handle.deadline_at,
                             joined_identical_request=handle.coalesced).model_dump_json(),
                    status_code=202, media_type="application/json")


class ErrorDetail(BaseModel):
    code: str = Field(description="no_key, bad_key, revoked_key, too_many_failures, other_namespace, read_only, "
                                  "rate_limited, too_large, body_too_slow, key_in_url, bad_body, invalid_request, "
                                  "request_id_taken, not_found, method_not_allowed, not_yet, unavailable, "
                                  "store_unavailable, bad_result, failed")
    message: str
    field: str | None = Field(None, description="The request's field at fault (invalid_request).")
    job_id: str | None = Field(None, description="The job still running (not_yet).")


class ErrorAnswer(BaseModel):
    error: ErrorDetail


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorAnswer, "description": what} for status, what in (
        (400, "A key in the URL."), (401, "No key, or not a valid or live key."),
        (403, "The key does not reach the namespace, or is read-only."), (404, "No such job in the namespace."),
        (405, "The route takes another method."), (408, "The body did not arrive in time."),
        (413, "The body is too large."), (422, "A field is invalid: `field` names it."),
        (429, "The key's rate is used up, or too many wrong keys: see Retry-After."),
        (500, "The server failed (its log says why)."),
        (503, "Redis or the memory store does not answer: see Retry-After."))}

router = APIRouter(prefix="/v1/namespaces/{namespace}", responses=_ERRORS)


_TAKEN: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorAnswer, "description": "The request id was already used for a different request."}}


@router.post("/query", response_model=RetrievalResult, summary="Search and wait for the final result",
             responses={**_TAKEN, 504: {"model": ErrorAnswer,
                                        "description": "No final result within the wait (the job may still finish)."}})
@needs(Action.READ)
async def query(namespace: NamespacePath, body: Annotated[QueryBody, Body()], request: Request) -> Response:
    ferret = _ferret(request)
    fields = body.model_dump(exclude_unset=True)
    wait = fields.pop("wait_seconds", None)
    handle = await ferret.enqueue({**fields, "namespace": namespace})
    if wait is None:
        service = ferret.settings.service
        deadline = fields.get("deadline_seconds") or (service.prefetch_deadline_seconds if handle.queue == "prefetch"
                                                      else service.batch_deadline_seconds)
        wait = deadline + WAIT_GRACE_SECONDS
    limit = request.app.state.http.max_wait_seconds
    waiting = request.app.state.metrics.waiting
    waiting.inc()
    try:
        return _json(await ferret.wait(handle, min(wait, limit)))
    finally:
        waiting.dec()


@router.post("/jobs", response_model=Enqueued, status_code=202, responses=_TAKEN,
             summary="Enqueue a request; read it at /jobs/{job_id}")
@needs(Action.READ)
async def enqueue(namespace: NamespacePath, body: Annotated[JobBody, Body()], request: Request) -> Response:
    return _enqueued(await _ferret(request).enqueue({**body.model_dump(exclude_unset=True), "namespace": namespace}))


async def _own_result(request: Request, namespace: str, job_id: str) -> RetrievalResult | None:
    """The job's result when it is this namespace's (another's is as if none existed)."""
    found = await _ferret(request).result(job_id)
    return found if found is not None and found.namespace == namespace else None


@router.get("/jobs/{job_id}", response_model=JobView, summary="A job's final status and result, or where RQ has it")
@needs(Action.READ)
async def job(namespace: NamespacePath, job_id: JobPath, request: Request) -> Response:
    found = await _own_result(request, namespace, job_id)
    if found is not None:
        return _json(JobView(job_id=job_id, status=found.status, rq_state=None, result=found))
    state = await _ferret(request).status(job_id)
    if state.status is not None:  # it finished a moment ago, or it is another namespace's
        found = await _own_result(request, namespace, job_id)
        if found is not None:
            return _json(JobView(job_id=job_id, status=found.status, rq_state=None, result=found))
    if state.status is not None or state.rq_state is None:
        raise JobNotFound(f"no job {job_id} in namespace {namespace}")
    return _json(JobView(job_id=job_id, status=None, rq_state=state.rq_state))


@router.get("/jobs/{job_id}/trace", summary="A finished job's span trace")
@needs(Action.READ)
async def trace(namespace: NamespacePath, job_id: JobPath, request: Request) -> dict[str, Any]:
    if await _own_result(request, namespace, job_id) is None:
        raise JobNotFound(f"no finished job {job_id} in namespace {namespace}")
    return await _ferret(request).trace(job_id)


@router.post("/conversations/{conversation}/prefetch", response_model=Enqueued, status_code=202,
             summary="Start fetching context for a conversation's next turn (a newer one replaces one queued)")
@needs(Action.READ)
async def prefetch(namespace: NamespacePath, conversation: ConversationPath,
                   body: Annotated[PrefetchBody, Body()], request: Request) -> Response:
    fields = body.model_dump(mode="json", exclude_unset=True)
    return _enqueued(await _ferret(request).prefetch(namespace, conversation, fields.pop("query"), **fields))


@router.get("/conversations/{conversation}/context", response_model=ContextView,
            summary="The conversation's freshest prefetched context (ready: false when none is)")
@needs(Action.READ)
async def context(namespace: NamespacePath, conversation: ConversationPath, request: Request) -> Response:
    found = await _ferret(request).context_for(namespace, conversation)
    if found is None:
        return _json(ContextView(ready=False))
    result = found.result
    return _json(ContextView(ready=True, context=result.context, job_id=result.job_id, status=result.status,
                             results=[item.model_dump(mode="json") for item in result.results],
                             age_seconds=round(found.age_seconds, 3), stale=found.stale,
                             newer_pending=found.newer_pending))


@router.post("/memories", summary="Write memories (an existing id is replaced); how many",
             responses={200: {"content": {"application/json": {"example": {"written": 2}}}}})
@needs(Action.WRITE)
async def remember(namespace: NamespacePath, body: Annotated[MemoriesBody, Body()], request: Request) -> dict[str, int]:
    return {"written": await _ferret(request).remember(namespace, body.memories)}


@router.post("/memories/forget", summary="Delete memories by id; how many there were")
@needs(Action.WRITE)
async def forget(namespace: NamespacePath, body: Annotated[ForgetBody, Body()], request: Request) -> dict[str, int]:
    return {"deleted": await _ferret(request).forget(namespace, body.ids)}

