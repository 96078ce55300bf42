"""Tracing: spans shaped like OpenTelemetry spans.

Three implementations of one small interface: ``NoopTracer`` (records
nothing), ``SpanCollector`` (keeps spans in memory: the worker writes them to
Redis with the result, tests read them as a spy). A tracer never fails the
work: it only appends to a list.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

_ids = random.Random(os.urandom(16))  # ids need uniqueness, not secrecy


def new_trace_id() -> str:
    return f"{_ids.getrandbits(128):032x}"


def new_span_id() -> str:
    return f"{_ids.getrandbits(64):016x}"


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start_time_unix_nano: int
    end_time_unix_nano: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "OK"

    @property
    def duration_ms(self) -> float:
        return (self.end_time_unix_nano - self.start_time_unix_nano) / 1e6

    def set(self, **attributes: Any) -> None:
        self.attributes.update(attributes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "start_time_unix_nano": self.start_time_unix_nano,
            "end_time_unix_nano": self.end_time_unix_nano,
            "duration_ms": round(self.duration_ms, 3),
            "attributes": self.attributes,
            "status": self.status,
        }


class NoopTracer:
    """Records nothing; spans still carry timings for the caller's use."""

    trace_id = "0" * 32
    root_span_id: str | None = None

    @contextmanager
    def span(self, name: str, parent: str | None = None, **attributes: Any) -> Iterator[Span]:
        span = Span(name, self.trace_id, "0" * 16, parent, time.time_ns(), attributes=attributes)
        try:
            yield span
        finally:
            span.end_time_unix_nano = time.time_ns()

    def add(self, span: Span) -> None:
        return None

    @property
    def spans(self) -> list[Span]:
        return []


class _OpenSpan:
    """Context manager of one span: pushes it, times it, records it."""

    __slots__ = ("collector", "span", "stack")

    def __init__(self, collector: SpanCollector, span: Span, stack: list[str]) -> None:
        self.collector, self.span, self.stack = collector, span, stack

    def __enter__(self) -> Span:
        self.stack.append(self.span.span_id)
        return self.span

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stack.pop()
        span = self.span
        span.end_time_unix_nano = self.collector.clock_ns()
        if exc is not None:
            span.status = "ERROR"
            span.attributes.setdefault("error", f"{type(exc).__name__}: {exc}"[:500])
        self.collector.add(span)


class SpanCollector:
    """Keeps finished spans in memory, at most ``max_spans`` of them."""

    def __init__(self, trace_id: str | None = None, max_spans: int = 500,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        """``clock_ns``: epoch nanoseconds (a worker's: Redis's clock, ``ferret.redis_plumbing.clock``)."""
        self.trace_id = trace_id or new_trace_id()
        self.clock_ns = clock_ns
        self.max_spans = max_spans
        self.dropped = 0
        self._spans: list[Span] = []
        self.root_span_id: str | None = None
        self._open = threading.local()  # per thread: the stack of open spans

    def _stack(self) -> list[str]:
        stack = getattr(self._open, "stack", None)
        if stack is None:
            stack = self._open.stack = []
        return stack

    def span(self, name: str, parent: str | None = None, **attributes: Any) -> _OpenSpan:
        """A child of ``parent``, else of the innermost open span in this thread."""
        stack = self._stack()
        parent = parent or (stack[-1] if stack else self.root_span_id)
        span = Span(name, self.trace_id, new_span_id(), parent, self.clock_ns(), attributes=attributes)
        return _OpenSpan(self, span, stack)

    def add(self, span: Span) -> None:
        if len(self._spans) >= self.max_spans:
            self.dropped += 1
            return
        self._spans.append(span)

    @property
    def spans(self) -> list[Span]:
        return sorted(self._spans, key=lambda s: s.start_time_unix_nano)


Tracer = NoopTracer | SpanCollector
