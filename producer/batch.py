"""Batch reprocessing: many requests from JSONL, results to JSONL, resumable.

Each input line is a request object (at least ``query``). Lines without a
``request_id`` get one derived from the line number and content, so a
re-run names the same jobs. ``resume`` skips lines whose final result is
already in the output file and re-enqueues only those with no final result
(enqueueing is idempotent, so jobs still queued or running are not doubled).
Invalid lines are written to the output as ``failed`` with the error.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from ferret.contract import FINAL_STATUSES
from ferret.errors import BadResult, InvalidRequest, ResultTimeout
from ferret.json_input import parse_object
from ferret.producer.client import JobHandle, Producer


@dataclass
class BatchSummary:
    total: int = 0
    skipped_done: int = 0
    enqueued: int = 0
    invalid: int = 0
    unfinished: int = 0
    bad_results: int = 0  # what was stored as the answer was not one, or not this line's (forged, corrupt)
    by_status: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "skipped_done": self.skipped_done, "enqueued": self.enqueued,
                "invalid": self.invalid, "unfinished": self.unfinished, "bad_results": self.bad_results,
                "by_status": dict(self.by_status)}


def derived_request_id(prefix: str, number: int, line: str) -> str:
    digest = hashlib.sha256(line.strip().encode()).hexdigest()[:12]
    return f"{prefix}-{number}-{digest}"


def done_request_ids(out_path: Path) -> set[str]:
    """Request ids with a final result already in the output file."""
    done: set[str] = set()
    if not out_path.exists():
        return done
    with out_path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(row, dict) and row.get("status") in FINAL_STATUSES and row.get("request_id"):
                done.add(row["request_id"])
    return done


def _request_of(line: str, number: int, prefix: str, cache: bool) -> dict[str, Any]:
    data = parse_object(line, "line")
    data.setdefault("queue", "batch")
    data.setdefault("request_id", derived_request_id(prefix, number, line))
    options = data.get("options", {})
    if not cache and isinstance(options, dict):  # a line's own choice wins
        data["options"] = {"cache": False, **options}
    return data


def _write(out: IO[str], row: dict[str, Any]) -> None:
    out.write(json.dumps(row, ensure_ascii=False) + "\n")
    out.flush()


class BatchProgress(Protocol):
    """What a batch reports as it goes: the enqueue phase (one call per line),
    then the wait phase (its size, then one call per result or give-up)."""

    def line_done(self) -> None: ...

    def waiting_for(self, jobs: int) -> None: ...

    def collected(self, status: str | None) -> None: ...  # None: no final result in time


class NoProgress:
    def line_done(self) -> None:
        pass

    def waiting_for(self, jobs: int) -> None:
        pass

    def collected(self, status: str | None) -> None:
        pass


def run_batch(producer: Producer, lines: Iterable[str], out_path: Path, *, resume: bool = False,
              prefix: str = "batch", wait_seconds: float = 3600.0, cache: bool = True,
              progress: BatchProgress | None = None) -> BatchSummary:
    """Enqueue every line, then write each final result as it is read."""
    progress = progress or NoProgress()
    summary = BatchSummary()
    done = done_request_ids(out_path) if resume else set()
    pending: list[tuple[int, JobHandle]] = []
    with out_path.open("a" if resume else "w", encoding="utf-8") as out:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            summary.total += 1
            try:
                request = _request_of(line, number, prefix, cache)
                if request["request_id"] in done:
                    summary.skipped_done += 1
                else:
                    pending.append((number, producer.enqueue(request)))
                    summary.enqueued += 1
            except InvalidRequest as exc:
                summary.invalid += 1
                summary.by_status["failed"] += 1
                _write(out, {"line": number, "request_id": derived_request_id(prefix, number, line),
                             "status": "failed", "error": f"invalid request: {exc}"})
            progress.line_done()
        progress.waiting_for(len(pending))
        deadline = time.monotonic() + wait_seconds
        for number, handle in pending:
            try:
                result = producer.wait(handle, max(0.0, deadline - time.monotonic()))
            except ResultTimeout:
                summary.unfinished += 1
                progress.collected(None)
                continue
            except BadResult as exc:  # forged or corrupt: that line's answer is unknown, the others go on
                summary.bad_results += 1
                progress.collected(None)
                _write(out, {"line": number, "request_id": handle.request_id, "job_id": handle.job_id,
                             "status": None, "error": str(exc)})
                continue
            progress.collected(result.status)
            summary.by_status[result.status] += 1
            _write(out, {"line": number, **result.model_dump(mode="json")})
    return summary
