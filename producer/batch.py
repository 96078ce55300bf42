"""Batch reprocessing: many requests from JSONL, results to JSONL, resumable.

Each input line is a request object (at least ``query``). A run is a new
computation: it gets a run id of its own (kept beside the output file, in
``OUT.run.json``), and a line without a ``request_id`` is named by the run,
its line number and its content, so running the file again after a memory
or settings change computes every such line anew. ``resume`` continues the
run recorded for the output file: lines whose final result is already in it
are skipped, the others enqueued again under the same ids (enqueueing is
idempotent, so jobs still queued or running are not doubled). A line with its
own ``request_id`` keeps it: the same id is the same job while its claim
lasts, so a re-run answers such a line with the earlier job; that line is
counted as ``reused`` and marked so in the output. Invalid lines are written
to the output as ``failed`` with the error.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from ferret.contract import FINAL_STATUSES, RetrievalResult
from ferret.errors import BadResult, InvalidRequest, ResultTimeout
from ferret.json_input import parse_object
from ferret.producer.client import JobHandle, Producer

RUN_SUFFIX = ".run.json"


@dataclass
class BatchSummary:
    run: str = ""
    total: int = 0
    skipped_done: int = 0
    enqueued: int = 0
    reused: int = 0  # lines whose own request_id named an earlier job: its answer, not a new one
    invalid: int = 0
    unfinished: int = 0
    bad_results: int = 0  # what was stored as the answer was not one, or not this line's (forged, corrupt)
    by_status: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "total": self.total, "skipped_done": self.skipped_done, "enqueued": self.enqueued,
                "reused": self.reused,
                "invalid": self.invalid, "unfinished": self.unfinished, "bad_results": self.bad_results,
                "by_status": dict(self.by_status)}


def derived_request_id(run: str, number: int, line: str) -> str:
    """The request id of a line with none of its own: the run's id, the line's number and a digest of it."""
    digest = hashlib.sha256(line.strip().encode()).hexdigest()[:12]
    return f"{run}-{number}-{digest}"


def run_file(out_path: Path) -> Path:
    return out_path.with_name(out_path.name + RUN_SUFFIX)


def new_run(out_path: Path) -> str:
    """A fresh run id, recorded beside the output file (``--resume`` reads it)."""
    run = "run-" + secrets.token_hex(6)
    run_file(out_path).write_text(json.dumps({"run": run, "output": out_path.name}) + "\n")
    return run


def recorded_run(out_path: Path) -> str:
    """The run recorded for ``out_path``; InvalidRequest (``--resume``) when there is none to continue."""
    try:
        data = json.loads(run_file(out_path).read_text())
        run = data["run"]
    except FileNotFoundError:
        raise InvalidRequest("--resume", f"no run is recorded for {out_path} ({run_file(out_path).name} is "
                                         "missing): run without --resume to compute every line") from None
    except (OSError, ValueError, KeyError, TypeError):
        raise InvalidRequest("--resume", f"{run_file(out_path)} is not a run record: run without --resume") from None
    if not isinstance(run, str) or not run.startswith("run-") or not run[4:].isalnum():
        raise InvalidRequest("--resume", f"{run_file(out_path)} names no valid run: run without --resume")
    return run


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


def _request_of(line: str, number: int, run: str, cache: bool) -> tuple[dict[str, Any], bool]:
    """The line's request, and whether it named its own request id."""
    data = parse_object(line, "line")
    own_id = "request_id" in data
    data.setdefault("queue", "batch")
    data.setdefault("request_id", derived_request_id(run, number, line))
    options = data.get("options", {})
    if not cache and isinstance(options, dict):  # a line's own choice wins
        data["options"] = {"cache": False, **options}
    return data, own_id


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


ENQUEUE_CHUNK = 256  # lines enqueued side by side: each of enqueue's round trips made once for all of them
READ_CHUNK = 512  # pending jobs whose results are read in one round trip
STALL_SECONDS = 2.0  # no result for this long: the oldest pending job gets the full wait (lost? refused?)
POLL_SECONDS = (0.005, 0.2)  # pause between reads while results trickle in: from, doubling up to


def run_batch(producer: Producer, lines: Iterable[str], out_path: Path, *, resume: bool = False,
              wait_seconds: float = 3600.0, cache: bool = True,
              progress: BatchProgress | None = None) -> BatchSummary:
    """Enqueue every line (``ENQUEUE_CHUNK`` at a time, side by side), then write each final result as it
    arrives, in the order they finish (each row names its line)."""
    progress = progress or NoProgress()
    run = recorded_run(out_path) if resume else new_run(out_path)
    summary = BatchSummary(run=run)
    done = done_request_ids(out_path) if resume else set()
    pending: dict[int, tuple[int, JobHandle, bool]] = {}  # by line: line, job, whether an earlier run's job answers
    with out_path.open("a" if resume else "w", encoding="utf-8") as out:
        chunk: list[tuple[int, str, dict[str, Any], bool]] = []

        def enqueue_chunk() -> None:
            answers = producer.enqueue_many([request for _, _, request, _ in chunk])
            for (number, line, _request, own_id), answer in zip(chunk, answers, strict=True):
                if isinstance(answer, InvalidRequest):
                    _invalid(out, summary, run, number, line, answer)
                elif isinstance(answer, Exception):
                    raise answer
                else:
                    # An id of the line's own that an earlier job holds: that job's answer, not a new one (a
                    # resumed run joining its own jobs is not that).
                    reused = own_id and not resume and answer.duplicate and not answer.coalesced
                    pending[number] = (number, answer, reused)
                    summary.enqueued += 1
                    summary.reused += reused
                progress.line_done()
            chunk.clear()

        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            summary.total += 1
            try:
                request, own_id = _request_of(line, number, run, cache)
            except InvalidRequest as exc:
                _invalid(out, summary, run, number, line, exc)
                progress.line_done()
                continue
            if request["request_id"] in done:
                summary.skipped_done += 1
                progress.line_done()
                continue
            chunk.append((number, line, request, own_id))
            if len(chunk) >= ENQUEUE_CHUNK:
                enqueue_chunk()
        if chunk:
            enqueue_chunk()
        progress.waiting_for(len(pending))
        _collect(producer, pending, out, summary, progress, time.monotonic() + wait_seconds)
    return summary


def _invalid(out: IO[str], summary: BatchSummary, run: str, number: int, line: str, exc: InvalidRequest) -> None:
    summary.invalid += 1
    summary.by_status["failed"] += 1
    _write(out, {"line": number, "request_id": derived_request_id(run, number, line),
                 "status": "failed", "error": f"invalid request: {exc}"})


def _collect(producer: Producer, pending: dict[int, tuple[int, JobHandle, bool]], out: IO[str],
             summary: BatchSummary, progress: BatchProgress, deadline: float) -> None:
    """Read the pending jobs' results in bulk, oldest first, writing each as it is found. When nothing has
    come for ``STALL_SECONDS``, the oldest pending job gets the producer's full wait, which enqueues again a
    job a failover lost and ends a refused one with its refusal."""
    pause, last_found = POLL_SECONDS[0], time.monotonic()
    while pending and time.monotonic() < deadline:
        oldest = list(pending.values())[:READ_CHUNK]
        found = 0
        for (number, handle, reused), answer in zip(oldest, producer.results_of([h for _, h, _ in oldest]),
                                                    strict=True):
            if answer is None:
                continue
            found += 1
            del pending[number]
            _record(out, summary, progress, number, handle, reused, answer)
        if found:
            pause, last_found = POLL_SECONDS[0], time.monotonic()
            continue
        if time.monotonic() - last_found < STALL_SECONDS:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, POLL_SECONDS[1])
            continue
        number, handle, reused = next(iter(pending.values()))
        try:
            answer: RetrievalResult | Exception = producer.wait(
                handle, min(STALL_SECONDS, max(0.0, deadline - time.monotonic())))
        except ResultTimeout:
            last_found = time.monotonic() - STALL_SECONDS / 2  # read in bulk for a while, then this one again
            continue
        except BadResult as exc:
            answer = exc
        del pending[number]
        last_found = time.monotonic()
        _record(out, summary, progress, number, handle, reused, answer)
    for _ in pending:
        summary.unfinished += 1
        progress.collected(None)


def _record(out: IO[str], summary: BatchSummary, progress: BatchProgress, number: int, handle: JobHandle,
            reused: bool, answer: RetrievalResult | Exception) -> None:
    if isinstance(answer, BadResult):  # forged or corrupt: that line's answer is unknown, the others go on
        summary.bad_results += 1
        progress.collected(None)
        _write(out, {"line": number, "request_id": handle.request_id, "job_id": handle.job_id,
                     "status": None, "error": str(answer)})
        return
    if isinstance(answer, Exception):
        raise answer
    progress.collected(answer.status)
    summary.by_status[answer.status] += 1
    _write(out, {"line": number, **({"reused": True} if reused else {}), **answer.model_dump(mode="json")})
