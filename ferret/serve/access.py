"""What a key may do: the one rule every HTTP route (through the gate) and every MCP tool asks.

A route or a tool declares what it does, ``READ`` (search, read results, traces and contexts, prefetch) or
``WRITE`` (write or delete memories), with ``needs``; a key may do it in a namespace it reaches, and a
read-only key only reads. A route under ``/v1`` or a tool that declares nothing is not served at all
(``undeclared``), so a new one cannot forget to ask."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any, TypeVar

from ferret.serve.api_keys import ApiKey

F = TypeVar("F", bound=Callable[..., Any])

_DECLARED = "__ferret_access__"


class Action(StrEnum):
    READ = "read"
    WRITE = "write"


class Refused(Exception):
    """An HTTP request or a tool call that is not let through: status, reason (the error's code), message."""

    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.reason, self.message, self.headers = status, reason, message, headers or {}


def needs(action: Action) -> Callable[[F], F]:
    """Declares what a route's endpoint or a tool does."""
    def declare(function: F) -> F:
        setattr(function, _DECLARED, action)
        return function
    return declare


def declared(function: Any) -> Action | None:
    return getattr(function, _DECLARED, None)


def undeclared(functions: Iterable[Any]) -> list[str]:
    """The names of those that declare no action."""
    return [getattr(f, "__name__", repr(f)) for f in functions if declared(f) is None]


def authorize(key: ApiKey, namespace: str, action: Action) -> None:
    """Nothing when ``key`` may do ``action`` in ``namespace``; else ``Refused`` (403) saying why."""
    if not key.reaches(namespace):
        raise Refused(403, "other_namespace", "this key does not reach that namespace")
    if action is Action.WRITE and key.read_only:
        raise Refused(403, "read_only", "this key is read-only: it cannot write or delete memories")
