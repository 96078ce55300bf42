"""RQ's job, with its data inflated under a cap.

RQ keeps a job's data zlib-compressed in its hash and inflates it whole when
the hash is read (``Job.restore``): a megabyte in Redis can be a gibibyte
in the worker. ``BoundedJob`` inflates it incrementally and stops at the
cap (``limits.max_job_data_bytes``): past it the job is refused
(``JobDataTooLarge``, reason ``malformed_job``), having cost at most the
cap. Data that is not zlib is taken as it is stored, as RQ does, bounded by
what Redis holds; inflated data is never inflated again (RQ would try: data
compressed twice would be a bomb behind a small first layer).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rq.job import Job
from rq.registry import StartedJobRegistry

from ferret.inflate import InflatesTooLarge, inflate_capped

DEFAULT_CAP_BYTES = 1024 * 1024
_NOT_ZLIB = b"\x00"  # what RQ's restore is given instead of the data: zlib refuses it at once


class JobDataTooLarge(ValueError):
    """The job's data inflates past the cap."""


def inflate(data: bytes, cap: int) -> bytes:
    """``data`` inflated, at most ``cap`` bytes of it, else ``JobDataTooLarge``;
    data that is not a whole zlib stream is returned as it is (RQ's rule)."""
    try:
        inflated = inflate_capped(data, cap)
    except InflatesTooLarge:
        raise JobDataTooLarge(f"job data inflates past {cap:,} bytes") from None
    return data if inflated is None else inflated


class BoundedJob(Job):
    """``Job`` whose data is inflated under ``max_data_bytes`` (see the module), and whose started
    registry is built once per queue and connection: RQ builds one each time an execution is created or
    deleted (twice a job), and each build checks the serializer against a typing Protocol (~9 us)."""

    max_data_bytes = DEFAULT_CAP_BYTES
    _registries: ClassVar[dict[tuple[type, str, Any, Any], StartedJobRegistry]] = {}

    @property
    def started_job_registry(self) -> StartedJobRegistry:
        key = (type(self), self.origin, self.connection, self.serializer)
        registry = self._registries.get(key)
        if registry is None:
            registry = self._registries[key] = StartedJobRegistry(
                self.origin, connection=self.connection, job_class=type(self), serializer=self.serializer)
        return registry

    def restore(self, raw_data: Any) -> Any:
        if not isinstance(raw_data, dict) or b"data" not in raw_data:
            return super().restore(raw_data)
        stored = raw_data[b"data"]
        data = inflate(stored if isinstance(stored, bytes) else str(stored).encode(), self.max_data_bytes)
        outcome = super().restore({**raw_data, b"data": _NOT_ZLIB})
        self.data = data
        return outcome


def bounded_job_class(max_data_bytes: int) -> type[Job]:
    """A ``BoundedJob`` class with this cap (one per worker: RQ takes a class, not an instance)."""
    return type("BoundedJob", (BoundedJob,), {"max_data_bytes": max_data_bytes})
