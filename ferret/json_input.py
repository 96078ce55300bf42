"""Parsing JSON objects that come from users, with errors naming the field."""

from __future__ import annotations

import json
from typing import Any

from ferret.errors import InvalidRequest


def parse_object(text: str | bytes, field: str, error: type[InvalidRequest] = InvalidRequest) -> dict[str, Any]:
    """``text`` as a JSON object, or ``error(field, ...)`` saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        where = f" at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise error(field, f"is not valid JSON ({message}{where})") from None
    if not isinstance(data, dict):
        raise error(field, f"must be a JSON object, not {type(data).__name__}")
    return data
