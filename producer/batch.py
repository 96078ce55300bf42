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

A batch of any size keeps only a window of lines in flight (``ferret.producer.batch_window``): a line is
enqueued when the workers have drained room for it, so its deadline, which counts from its enqueue, is
spent on its work, not in the queue; the producer holds only the window's lines, whatever the file's size.
A line's result, once written to the output, is kept in Redis only ``KEPT_AFTER_WRITTEN_SECONDS`` more
(with its trace and its wake-up list; its claim stays, small), unless the run keeps them (``keep_results``)
or the line named its own request id (others may wait on that job): what a batch leaves in Redis is the
lines in flight and the last minute's, not an hour of every line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from ferret import keys
from ferret.contract import FINAL_STATUSES, RetrievalResult
from ferret.errors import BadResult, InvalidRequest, RedisUnreachable, ResultTimeout
from ferret.json_input import parse_object
from ferret.producer.batch_window import MAX_QUEUE_SECONDS, InFlightWindow, queue_seconds_for
from ferret.producer.client import JobHandle, Producer
from ferret.result_json import result_json

RUN_SUFFIX = ".run.json"

logger = logging.getLogger(__name__)


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


def _write(out: IO[bytes], row: dict[str, Any], result: RetrievalResult | None = None) -> None:
    """One output line, compact JSON in UTF-8: ``row``'s fields, then ``result``'s (``result_json``: the model's
    own JSON, not turned into a dict and dumped again). Buffered: the collector flushes after each read of
    results (a line cut short by a crash is skipped by ``--resume``, which reads that line's job again)."""
    try:
        head = orjson.dumps(row)
    except orjson.JSONEncodeError:  # what orjson refuses (a lone surrogate): the standard library's form
        head = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()
    if result is not None:
        head = head[:-1] + b"," + result_json(result)[1:]
    out.write(head + b"\n")


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
MIN_PART = 32  # the fewest lines enqueued side by side once the window is full (fewer when fewer are left)
READ_CHUNK = 512  # pending jobs whose results are read in one round trip
STALL_SECONDS = 2.0  # no result for this long: the oldest pending job gets the full wait (lost? refused?)
POLL_SECONDS = 0.2  # the longest a listen waits before the stall check
KEPT_AFTER_WRITTEN_SECONDS = 60  # a line's result in Redis once it is in the output (a late reader's margin)


def run_batch(producer: Producer, lines: Iterable[str], out_path: Path, *, resume: bool = False,
              wait_seconds: float = 3600.0, cache: bool = True,
              progress: BatchProgress | None = None, keep_results: bool = False) -> BatchSummary:
    """Enqueue every line (``ENQUEUE_CHUNK`` at a time, side by side, while the in-flight window has room)
    and write each final result as it is announced (``_Collector``), in the order they finish (each row
    names its line). ``wait_seconds`` bounds the wait for room (no result for that long: the lines not
    enqueued yet are left unfinished, for ``--resume``) and the wait for the last results."""
    progress = progress or NoProgress()
    run = recorded_run(out_path) if resume else new_run(out_path)
    summary = BatchSummary(run=run)
    done = done_request_ids(out_path) if resume else set()
    window = InFlightWindow(queue_seconds_for(producer.settings.service.batch_deadline_seconds))
    with out_path.open("ab" if resume else "wb") as out, \
            _Collector(producer, out, summary, progress, window, keep_results) as collector:
        chunk: list[tuple[int, str, dict[str, Any], bool]] = []
        stalled = False

        def enqueue_part(part: list[tuple[int, str, dict[str, Any], bool]]) -> None:
            requests = [request for _, _, request, _ in part]
            carried = producer.enqueue_carried(requests)  # fresh lines, several an RQ job (ferret.carriers)
            # the others (None), the usual way: one RQ job each
            others = [request for request, answer in zip(requests, carried, strict=True) if answer is None]
            usual = iter(producer.enqueue_many(others))
            answers: list[JobHandle | Exception] = [next(usual) if answer is None else answer for answer in carried]
            for (number, line, _request, own_id), answer in zip(part, answers, strict=True):
                if isinstance(answer, InvalidRequest):
                    _invalid(out, summary, run, number, line, answer)
                elif isinstance(answer, Exception):
                    raise answer
                else:
                    # An id of the line's own that an earlier job holds: that job's answer, not a new one (a
                    # resumed run joining its own jobs is not that).
                    reused = own_id and not resume and answer.duplicate and not answer.coalesced
                    collector.expect(number, answer, reused, own_id)
                    summary.enqueued += 1
                    summary.reused += reused
                progress.line_done()
            collector.take_announced(0.0)  # results already in, written while the rest is enqueued
            out.flush()

        def send_chunk() -> bool:
            """The chunk's lines enqueued as the window makes room; False when the workers drained nothing
            for the whole wait (the rest not enqueued: unfinished, for --resume)."""
            while chunk:
                room = collector.room_for(len(chunk), wait_seconds)
                if room == 0:
                    summary.unfinished += len(chunk)
                    for _ in chunk:
                        progress.line_done()
                    chunk.clear()
                    return False
                enqueue_part(chunk[:room])
                del chunk[:room]
            return True

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
            if stalled:  # the workers drained nothing for the whole wait: left for --resume
                summary.unfinished += 1
                progress.line_done()
                continue
            chunk.append((number, line, request, own_id))
            if len(chunk) >= ENQUEUE_CHUNK:
                stalled = not send_chunk()
        if chunk:
            send_chunk()
        progress.waiting_for(summary.enqueued)
        collector.finish(time.monotonic() + wait_seconds)
    return summary


def _invalid(out: IO[bytes], summary: BatchSummary, run: str, number: int, line: str, exc: InvalidRequest) -> None:
    summary.invalid += 1
    summary.by_status["failed"] += 1
    _write(out, {"line": number, "request_id": derived_request_id(run, number, line),
                 "status": "failed", "error": f"invalid request: {exc}"})


class _Collector:
    """The batch's results, learnt of by notification: a worker's result script publishes on the job's done
    channel; the batch listens to every done channel (one pattern, subscribed before the first enqueue, so
    no announcement of its jobs comes before it listens) and reads the announced results of its own jobs in
    bulk, one round trip per ``READ_CHUNK``. Pub/sub is at most once (a reconnect loses what was published
    meanwhile): when nothing has come for ``STALL_SECONDS``, the oldest pending jobs are read in bulk, and
    if the oldest is still without a result it gets the producer's full wait, which enqueues again a job a
    failover lost and ends a refused one with its refusal."""

    def __init__(self, producer: Producer, out: IO[bytes], summary: BatchSummary, progress: BatchProgress,
                 window: InFlightWindow | None = None, keep_results: bool = True) -> None:
        self.producer, self.out, self.summary, self.progress = producer, out, summary, progress
        self.keep_results = keep_results
        self.written: list[RetrievalResult] = []  # results in the output, their keys not shortened yet
        self.window = window or InFlightWindow(MAX_QUEUE_SECONDS)
        # by line: its job, whether an earlier run's answers it, whether the line named its own request id
        self.pending: dict[int, tuple[JobHandle, bool, bool]] = {}
        self.by_job: dict[str, list[int]] = {}
        self.news = producer.client.pubsub(ignore_subscribe_messages=True)
        self.prefix = len(keys.done(""))
        self.last_found = time.monotonic()

    def __enter__(self) -> _Collector:
        self.news.psubscribe(keys.done("*"))
        return self

    def __exit__(self, *_exc: object) -> None:
        self.news.close()

    def expect(self, number: int, handle: JobHandle, reused: bool, own_id: bool = False) -> None:
        self.pending[number] = (handle, reused, own_id)
        self.by_job.setdefault(handle.job_id, []).append(number)

    def read(self, numbers: list[int]) -> int:
        """Read these lines' results in bulk; write those found; how many."""
        found = 0
        for start in range(0, len(numbers), READ_CHUNK):
            part = [number for number in numbers[start:start + READ_CHUNK] if number in self.pending]
            answers = self.producer.results_of([self.pending[number][0] for number in part])
            for number, answer in zip(part, answers, strict=True):
                if answer is not None:
                    found += 1
                    self._record(number, answer)
        if found:
            self.last_found = time.monotonic()
            self.out.flush()
            self.let_go()
        return found

    def let_go(self) -> None:
        """The results written to the output (and flushed) kept in Redis only ``KEPT_AFTER_WRITTEN_SECONDS``
        more, in one round trip."""
        written, self.written = self.written, []
        if self.keep_results or not written:
            return
        ttl = self.producer.settings.service.batch_result_ttl_seconds
        seconds = min(KEPT_AFTER_WRITTEN_SECONDS, ttl)
        with self.producer.client.pipeline(transaction=False) as pipe:
            for result in written:
                for key in (keys.result(result.job_id), keys.done(result.job_id), keys.carried_by(result.job_id)):
                    pipe.expire(key, seconds)
                if result.trace_id:
                    pipe.expire(keys.trace(result.trace_id), seconds)
            pipe.execute()

    def take_announced(self, block_seconds: float) -> int:
        """Read the results announced so far (waiting up to ``block_seconds`` for a first one)."""
        announced: list[int] = []
        message = self.news.get_message(timeout=block_seconds)
        while message is not None and len(announced) < READ_CHUNK:
            if message.get("type") == "pmessage":
                channel = message["channel"]
                job_id = (channel.decode(errors="replace") if isinstance(channel, bytes) else str(channel))
                announced += self.by_job.get(job_id[self.prefix:], [])
            message = self.news.get_message(timeout=0)
        return self.read(announced) if announced else 0

    def room_for(self, lines: int, wait_seconds: float) -> int:
        """How many of ``lines`` may be enqueued now: results collected until the window has room for
        ``MIN_PART`` of them (or all, when fewer); 0 when no result came for ``wait_seconds`` meanwhile (the
        workers are stalled: the batch stops enqueuing). With no wait at all, every line at once."""
        if wait_seconds <= 0:  # --wait 0: enqueue everything now and wait for nothing (no window)
            return lines
        wanted = min(lines, MIN_PART)
        while self.pending and self.window.room(len(self.pending)) < wanted:
            if time.monotonic() - self.last_found > wait_seconds:
                return 0
            self._step(self.last_found + wait_seconds)
        return min(lines, max(wanted, self.window.room(len(self.pending))))

    def finish(self, deadline: float) -> None:
        while self.pending and deadline - time.monotonic() > 0:
            self._step(deadline)
        for _ in self.pending:
            self.summary.unfinished += 1
            self.progress.collected(None)

    def _step(self, deadline: float) -> None:
        """One turn of the wait: announced results read, or (nothing for ``STALL_SECONDS``) the pending ones
        read in bulk, or the oldest waited for."""
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if self.take_announced(min(POLL_SECONDS, left)) or time.monotonic() - self.last_found < STALL_SECONDS:
            return
        if self.read(list(self.pending)[:READ_CHUNK]):  # announcements missed (a reconnect)
            return
        number = next(iter(self.pending))
        try:
            answer: RetrievalResult | Exception = self.producer.wait(
                self.pending[number][0], min(self._full_wait(), max(0.0, deadline - time.monotonic())))
        except (ResultTimeout, RedisUnreachable) as exc:  # this one job's short wait is up: the batch's is longer
            if isinstance(exc, RedisUnreachable):
                logger.warning("%s; the batch waits on (until its --wait is up)", exc)
            self.last_found = time.monotonic() - STALL_SECONDS / 2  # listen a while, then this one again
            return
        except BadResult as exc:
            answer = exc
        self.last_found = time.monotonic()
        self._record(number, answer)
        self.out.flush()
        self.let_go()

    def _full_wait(self) -> float:
        """Long enough for the wait's own checks (is the job lost? refused?), which it makes once per
        ``redis.failover_check_seconds`` while more than that is left."""
        return max(STALL_SECONDS, 2 * self.producer.settings.redis.failover_check_seconds + 1)

    def _record(self, number: int, answer: RetrievalResult | Exception) -> None:
        handle, reused, own_id = self.pending.pop(number)
        self.window.drained(1)
        if isinstance(answer, RetrievalResult) and not reused and not own_id:  # others may wait on those
            self.written.append(answer)
        lines = self.by_job.get(handle.job_id)
        if lines is not None:
            if number in lines:
                lines.remove(number)
            if not lines:
                del self.by_job[handle.job_id]
        _record(self.out, self.summary, self.progress, number, handle, reused, answer)


def _record(out: IO[bytes], summary: BatchSummary, progress: BatchProgress, number: int, handle: JobHandle,
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
    _write(out, {"line": number, **({"reused": True} if reused else {})}, answer)
