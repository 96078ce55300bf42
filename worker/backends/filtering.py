"""Applying search filters to a memory: the one definition of what a filter means
(the indexes express it as a query; every backend checks its hits with it)."""

from __future__ import annotations

from datetime import UTC, datetime

from ferret.records import Filters, Memory, TimeRange


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo:
        return value
    return value.replace(tzinfo=UTC)


def _in_range(memory: Memory, time_range: TimeRange) -> bool:
    if time_range.type == "event":
        candidates = [memory.temporal_event_time]
    elif time_range.type == "ingestion":
        candidates = [memory.provenance_created_at]
    else:
        candidates = [memory.temporal_event_time, memory.provenance_created_at]
    start, end = _aware(time_range.start), _aware(time_range.end)
    for raw in candidates:
        moment = parse_time(raw)
        if moment is None:
            continue
        if (start is None or moment >= start) and (end is None or moment <= end):
            return True
    return False


def matches(memory: Memory, filters: Filters) -> bool:
    """True when ``memory`` passes every filter that is set."""
    if filters.type and memory.type != filters.type:
        return False
    if filters.subtype and memory.subtype != filters.subtype:
        return False
    if filters.lifecycle and (memory.state_lifecycle or "").upper() != filters.lifecycle.upper():
        return False
    if filters.cluster_ids and not set(filters.cluster_ids) & set(memory.cluster_ids):
        return False
    return not (filters.time_range and not _in_range(memory, filters.time_range))
