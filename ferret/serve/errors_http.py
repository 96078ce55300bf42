"""Ferret's errors as HTTP answers: one JSON shape, ``{"error": {"code", "message", ...}}``; a bad field is
named (``field``), as the command line names it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ferret.errors import (
    BackendError,
    BadResult,
    FerretError,
    InvalidRequest,
    JobNotFound,
    RedisUnreachable,
    ResultTimeout,
)


def error(status: int, code: str, message: str, **more: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **more}}, status_code=status)


def _ferret_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, InvalidRequest):
        return error(422, "invalid_request", exc.message, field=exc.field)
    if isinstance(exc, ResultTimeout):
        return error(504, "not_yet", str(exc), job_id=exc.job_id, rq_state=exc.rq_state)
    if isinstance(exc, JobNotFound):
        return error(404, "not_found", str(exc))
    if isinstance(exc, RedisUnreachable):
        return error(503, "unavailable", str(exc))
    if isinstance(exc, BackendError):
        return error(503, "store_unavailable", str(exc))
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


def install(app: FastAPI) -> None:
    app.add_exception_handler(FerretError, _ferret_error)
    app.add_exception_handler(RequestValidationError, _invalid)
