"""Schemathesis' hooks for the HTTP API's contract test: the one rule of the server that JSON Schema cannot say
(a time range's start after its end, refused with 422 naming ``filters.time_range``; the field's description
says so) is kept out of the requests generated as valid."""

from __future__ import annotations

from typing import Any

import schemathesis
from pydantic import ValidationError

from ferret.records import TimeRange


def _inverted(body: Any) -> bool:
    filters = body.get("filters") if isinstance(body, dict) else None
    given = filters.get("time_range") if isinstance(filters, dict) else None
    if not isinstance(given, dict):
        return False
    try:
        TimeRange.model_validate(given)
    except ValidationError as exc:
        return any("start must not be after end" in str(error.get("msg", "")) for error in exc.errors())
    return False


@schemathesis.hook
def filter_body(ctx: Any, body: Any) -> bool:
    return not _inverted(body)
