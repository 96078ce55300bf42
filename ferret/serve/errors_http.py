"""Ferret's errors as HTTP answers: one JSON shape, ``{"error": {"code", "message", ...}}``; a bad field is
named (``field``), as the command line names it. Redis out of reach is a 503 with ``Retry-After`` and one log
line; a body that does not parse, an unknown route or method, and anything unforeseen (a 500) answer in the same
shape."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ferret.errors import (
    BackendError,
    BadResult,
    FerretError,
    InvalidRequest,
    JobNotFound,
    RedisUnreachable,
    RequestIdTaken,
    ResultTimeout,
)
from ferret.redis_plumbing.redis_conn import REDIS_AWAY, reason
from ferret.serve.access import Refused

LOG = logging.getLogger("ferret.serve")
RETRY_AFTER_SECONDS = 1  # what a client is told to wait when Redis or the store does not answer

# The codes of FastAPI's and Starlette's own answers (a body that does not parse, no such route or method).
HTTP_CODES = {400: "bad_body", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None, **more: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **more}}, status_code=status, headers=headers)


def _away(status: int, code: str, message: str) -> JSONResponse:
    LOG.warning("%s: %s", code, message)
    return error(status, code, message, {"retry-after": str(RETRY_AFTER_SECONDS)})


def _ferret_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, RequestIdTaken):
        return error(409, "request_id_taken", exc.message, field=exc.field)
    if isinstance(exc, InvalidRequest):
        return error(422, "invalid_request", exc.message, field=exc.field)
    if isinstance(exc, ResultTimeout):
        return error(504, "not_yet", str(exc), job_id=exc.job_id, rq_state=exc.rq_state)
    if isinstance(exc, JobNotFound):
        return error(404, "not_found", str(exc))
    if isinstance(exc, RedisUnreachable):
        return _away(503, "unavailable", str(exc))
    if isinstance(exc, BackendError):
        return _away(503, "store_unavailable", str(exc))
    if isinstance(exc, BadResult):
        return error(502, "bad_result", str(exc))
    return error(500, "failed", str(exc))


def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
    where = [str(part) for part in first.get("loc", ()) if part != "body"]
    message = str(first.get("msg", "invalid"))
    if not where and first.get("type") in ("model_attributes_type", "dict_type", "json_invalid", "missing"):
        message = f"{message}: send a JSON object, with Content-Type: application/json"
    return error(422, "invalid_request", message, field=".".join(where) or "body")


def _redis_away(_: Request, exc: Exception) -> JSONResponse:
    return _away(503, "unavailable", f"Redis does not answer: {reason(exc)}")  # type: ignore[arg-type]


def _refused(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return error(exc.status, exc.reason, exc.message, exc.headers)


def _http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "the request could not be served"
    if exc.status_code == 400:
        message = f"{message}: send a JSON body in UTF-8"
    return error(exc.status_code, HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}"), message,
                 dict(exc.headers or {}))


def _unforeseen(_: Request, exc: Exception) -> JSONResponse:
    """A 500 in the one shape; Starlette then hands the error on to the server, which logs its traceback."""
    return error(500, "failed", "the server could not serve the request; its log says why")


def install(app: FastAPI) -> None:
    app.add_exception_handler(FerretError, _ferret_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Refused, _refused)
    for away in REDIS_AWAY:
        app.add_exception_handler(away, _redis_away)
    app.add_exception_handler(Exception, _unforeseen)  # Starlette answers with it, then re-raises to the server
