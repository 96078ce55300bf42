"""A forking worker whose work horse serves many jobs (``service.jobs_per_horse``).

RQ's forking ``Worker`` forks a work horse for every job, and a Ferret work horse builds its clients and
opens its namespace's index afresh each time: ~23 ms of CPU a job on this machine, against ~1.5 ms for the
same job in the worker's own process. Here the horse is kept: forked once, it takes the worker's jobs one
at a time through a pipe, runs each as RQ's horse would (``perform_job``: its start, its hard time limit,
its success or failure bookkeeping) with the clients and index it opened for the first, and answers one
byte a job. After ``jobs_per_horse`` jobs it is let go (its pipe closed: it exits) and the next job gets a
fresh one, as Celery's ``max_tasks_per_child`` does; 1 is RQ's own horse, one a job.

What the worker class promises stays: a job runs in a process of its own, not the worker's. A job that
kills its process (a crash in C code, the kernel's OOM killer, ``os._exit``) takes only the horse: the worker
sees the pipe close, ends that job ``failed`` as RQ ends a job whose horse died, and forks a new horse for
the next one. A job past its hard time limit is stopped in the horse by RQ's death penalty; one that hangs
past it (+ 60 s, RQ's rule) is killed with its horse from the worker. What is no longer fresh per job: the
horse's own memory. What one job leaves in the process (a module's state, memory it never frees) is there
for the next jobs of the same horse, up to ``jobs_per_horse`` of them; Ferret's job keeps nothing in module
state, its caches are the ones the simple worker keeps across jobs too.

Each job's id reaches the horse through the pipe (with its queue, its execution record's id and whether its
entry is in the queue's intermediate queue), and the horse reads the job's hash again as the untrusted
input it is (``take_entry``): one round trip, where RQ's fresh horse had the job in the memory it forked.

A job's answer carries its result: the horse sends the result's JSON (and its trace when spans are
exported) after the byte, and the worker's observers (metrics, the log line, span export) hear of the job
from it, where a horse's worker read the result back from Redis (a round trip, the result inflated and
checked again: ~19% of the worker's own samples). RQ's monitor bounds the worker's wait with its timer
(``SIGALRM`` every ``job_monitoring_interval``, whose handler raises, to send heart-beats); a raise that
lands just after a read of the answer returned loses what was read, and the worker then waits for ever on a
horse that waits for its next job. That happens whenever the timer's signal is taken by another thread of
the worker (the job pulse's: the kernel gives a process's signal to any thread, and Python runs its handler
in the main one at its next check, just after the read returns), most of all after the worker was paused
(SIGSTOP, a frozen container) past the timer while its horse answered. So the answer is read with the timer
noted, not raised (``ferret.rq_layer.horse_wait``): the wait polls the pipe, bounded by the timer and by the
interval on the worker's own clock, and raises RQ's monitor timeout itself once what was read is kept.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import logging
import os
import random
import signal
import struct
import time
from dataclasses import dataclass
from typing import IO, Any

import orjson
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue

from ferret.result_json import result_json
from ferret.rq_layer.bookkeeping import PARKED, parked
from ferret.rq_layer.entry import report_of
from ferret.rq_layer.gc_pacing import between_jobs
from ferret.rq_layer.horse_wait import Bound, read_byte, timer_noted
from ferret.rq_layer.intake import NOT_THE_ENTRY, take_entry

logger = logging.getLogger(__name__)

RAN = b"0"  # the job ran (RQ recorded its success or failure); the worker reads its result back
REPORTED = b"1"  # the job ran, and its result (and trace) follow (``_report_bytes``)
UNREADABLE = b"2"  # the job's hash could not be read as a Ferret job: nothing ran
_LENGTH = struct.Struct(">I")
RETIRE_SECONDS = 30.0  # a horse let go finishes its exit within this, or is killed
WAIT_STATUS_FAILED = 1 << 8  # what ``os.wait4`` gives for a process that exited with status 1


@dataclass
class _Horse:
    pid: int
    requests: IO[bytes]  # the worker writes a job a line
    replies: int  # the worker reads a byte a job (end of file: the horse is gone)
    served: int = 0
    busy: bool = False  # a job was handed over and its answer not read yet
    reply: bytes | None = None  # the job's answer byte, once read
    job: str | None = None  # the id of the job handed over last
    report: tuple[bytes, bytes] | None = None  # that job's result and trace, once read (when it sent them)
    outcome: tuple[int | None, int | None, Any] | None = None  # ``wait_for_horse``'s answer, once known

    def hand_over(self, job_id: str) -> None:
        """Job ``job_id`` was sent: nothing of its answer read yet."""
        self.job, self.busy, self.reply, self.report, self.outcome = job_id, True, None, None, None


class KeptHorse:
    """Mixin for RQ's forking ``Worker`` (put it just before ``Worker``)."""

    ferret_jobs_per_horse = 1  # service.jobs_per_horse; 1: RQ's horse, forked for each job
    _ferret_horse: _Horse | None = None
    _ferret_detached: list[int] | None = None  # horses let go mid-job, to be reaped once they exit
    _horse_pid: int
    connection: Any
    executions: dict[str, Execution]
    name: str
    queues: list[Queue]
    job_class: type[Job]
    serializer: Any
    job_monitoring_interval: int

    def _kept(self) -> bool:
        return self.ferret_jobs_per_horse > 1

    def fork_work_horse(self, job: Job, queue: Queue) -> None:
        """The job to the kept horse; a horse forked first when there is none (or the last one is done)."""
        if not self._kept():
            super().fork_work_horse(job, queue)  # type: ignore[misc]
            return
        message = self._request(job, queue)
        for attempt in range(2):
            horse = self._ready_horse()
            try:
                horse.requests.write(message)
                horse.requests.flush()
                break
            except OSError as exc:  # the horse died between two jobs (killed from outside): a fresh one
                logger.warning("worker %s: work horse %s was gone before job %s reached it (%s)", self.name,
                               horse.pid, job.id, exc)
                self._reap_horse()
                if attempt:
                    raise
        horse.hand_over(job.id)
        self._horse_pid = horse.pid

    def execute_job(self, job: Job, queue: Queue) -> Any:
        """RQ's (the execution record, the job to the horse, the horse watched). When the watch ends before
        the horse's answer (Redis out of reach while heart-beating, a stop), the horse is let go with its job:
        it finishes it and exits, as RQ's horse of that job would, and the next job gets a fresh horse (an
        answer left unread in the pipe would be taken for the next job's)."""
        try:
            return super().execute_job(job, queue)  # type: ignore[misc]
        finally:
            if self._ferret_horse is not None and self._ferret_horse.busy:
                self._detach_horse()

    def _let_go(self) -> _Horse | None:
        """The kept horse, no longer the worker's: its pipe closed, so it exits at its next read (after the job
        it runs, if any); None when there is none."""
        horse, self._ferret_horse = self._ferret_horse, None
        if horse is not None:
            _close(horse)
        return horse

    def _detach_horse(self) -> None:
        horse = self._let_go()
        assert horse is not None
        if self._ferret_detached is None:
            self._ferret_detached = []
        self._ferret_detached.append(horse.pid)
        logger.warning("worker %s: let work horse %s go with the job it runs; it exits when done", self.name,
                       horse.pid)

    def _reap_detached(self) -> None:
        if self._ferret_detached:
            self._ferret_detached = [pid for pid in self._ferret_detached if not _exited(pid)]

    def _ready_horse(self) -> _Horse:
        """The kept horse, alive, with jobs left to serve; a fresh one forked when there is none."""
        self._reap_detached()
        horse = self._ferret_horse
        if horse is not None and horse.served >= self.ferret_jobs_per_horse:
            self._retire_horse()
        elif horse is not None and _exited(horse.pid):  # between two jobs (killed from outside), now reaped
            self._let_go()
        if self._ferret_horse is None:
            self._ferret_horse = self._fork_kept_horse()
        return self._ferret_horse

    def _request(self, job: Job, queue: Queue) -> bytes:
        """The line that hands ``job`` to the horse: its id, queue, execution record, and whether its entry
        waits in the queue's intermediate queue for its start to take it out."""
        execution: Execution | None = self.execution  # type: ignore[attr-defined]  # RQ's: prepare_execution's
        return json.dumps({"job": job.id, "queue": queue.name, "parked": parked(job, len(self.queues) == 1),
                           "execution": execution.id if execution else None,
                           "created_at": execution.created_at.timestamp() if execution else None}).encode() + b"\n"

    def wait_for_horse(self) -> tuple[int | None, int | None, Any]:
        """Until the kept horse has run the job (as if a horse of its own had exited 0) or is gone (its exit
        status). RQ's monitor calls this within its timer: the wait ends by the timer, or by the monitor's
        interval on this process's clock, with RQ's ``HorseMonitorTimeoutException`` (the monitor then beats
        and calls again); what was read is kept, so the next call goes on from there."""
        horse = self._ferret_horse
        if not self._kept() or horse is None:
            return super().wait_for_horse()  # type: ignore[misc, no-any-return]
        if horse.outcome is None:
            with timer_noted() as timer:
                outcome = self._outcome(horse, Bound(timer, self.job_monitoring_interval))
                horse.outcome = outcome
        return horse.outcome

    def _outcome(self, horse: _Horse, bound: Bound) -> tuple[int | None, int | None, Any]:
        if horse.reply is None:
            horse.reply = read_byte(horse.replies, bound)
        if horse.reply == REPORTED and horse.report is None:
            try:  # the rest is on its way (sent at once): read whole, whatever the timer says
                horse.report = _read_report(horse.replies)
            except EOFError:  # the horse died sending it: the job had run; its result is read back
                logger.warning("worker %s: work horse %s died while answering", self.name, horse.pid)
                horse.reply = RAN
        horse.busy = False
        if horse.reply in (RAN, REPORTED):
            horse.served += 1
            return horse.pid, os.EX_OK, None
        if horse.reply == UNREADABLE:
            horse.served += 1
            return horse.pid, WAIT_STATUS_FAILED, None
        return self._reap_horse()

    def piped_report(self, job: Job) -> tuple[bytes, bytes] | None:
        """The result (and trace) the kept horse sent with ``job``'s answer; None when it sent none (the
        result is then read back from Redis, as for RQ's own horse)."""
        horse = self._ferret_horse
        if horse is None or horse.job != job.id:
            return None
        return horse.report

    def _reap_horse(self) -> tuple[int | None, int | None, Any]:
        """The kept horse's exit (it is gone or going), waited for; the worker forks a new one for its next
        job."""
        horse = self._let_go()
        assert horse is not None
        pid = status = rusage = None
        with contextlib.suppress(ChildProcessError):
            pid, status, rusage = os.wait4(horse.pid, 0)
        return pid, status, rusage

    def _retire_horse(self) -> None:
        """Let the kept horse go: its pipe closed, it exits (it is between two jobs); killed if it has not
        within ``RETIRE_SECONDS``."""
        horse = self._let_go()
        if horse is None:
            return
        ends_by = time.monotonic() + RETIRE_SECONDS
        while not _exited(horse.pid):
            if time.monotonic() > ends_by:
                logger.warning("worker %s: work horse %s did not exit when let go; killed", self.name, horse.pid)
                with contextlib.suppress(OSError):
                    os.killpg(horse.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(horse.pid, 0)
                return
            time.sleep(0.005)

    def _fork_kept_horse(self) -> _Horse:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the horse
            os.setpgrp()
            os.close(requests_write)
            os.close(replies_read)
            self._ferret_horse = None
            try:
                self._serve(os.fdopen(requests_read, "rb"), replies_write)
            finally:
                os._exit(1)  # _serve exits by itself; anything else is a horse that failed
        os.close(requests_read)
        os.close(replies_write)
        self.procline(f"Forked kept horse {pid}")  # type: ignore[attr-defined]
        return _Horse(pid, os.fdopen(requests_write, "wb"), replies_read)

    def _serve(self, requests: IO[bytes], replies: int) -> None:
        """The horse's loop: a job a line, until the worker closes the pipe."""
        random.seed()
        self.setup_work_horse_signals()  # type: ignore[attr-defined]
        self._is_horse = True
        self.log = logger
        context = getattr(self, "ferret_context", None)
        if context is not None:  # this process's clients and index, opened once for all its jobs
            self.ferret_context = context.for_this_process(self.connection)
        for line in requests:
            try:
                taken = self._taken(line)
            except BaseException:  # Redis out of reach past the client's retries, a stop: as RQ's horse, exit 1
                os._exit(1)
            if taken is None:
                os.write(replies, UNREADABLE)
                continue
            job, queue, execution = taken
            try:
                self.perform_job(job, queue, execution)  # type: ignore[attr-defined]
            except BaseException:  # RQ's horse exits 1 on anything perform_job lets out
                os._exit(1)
            answer = self._answer_for(job)
            between_jobs()
            try:
                _write_all(replies, answer)
            except OSError as exc:  # the worker is gone
                os._exit(0 if exc.errno == errno.EPIPE else 1)
        os._exit(0)

    def _answer_for(self, job: Job) -> bytes:
        """``REPORTED`` with the job's result (and its trace when spans are exported), when the run left a
        report the worker's observers are to hear of; else ``RAN``."""
        report = report_of(job)
        if report is None or report.dropped or report.held:
            return RAN
        context = getattr(self, "ferret_context", None)
        exported = context is not None and bool(context.settings.tracing.otlp_endpoint)
        try:
            return _report_bytes(result_json(report.result),
                                 orjson.dumps(report.trace) if exported and report.trace else b"")
        except Exception:  # the worker reads the result back instead
            logger.exception("work horse %s: the report of job %s could not be sent", os.getpid(), job.id)
            return RAN

    def _taken(self, line: bytes) -> tuple[Job, Queue, Execution] | None:
        """The job, queue and execution a request line names; None when the job cannot be read as a Ferret
        job now (said so)."""
        try:
            message = json.loads(line)
            queue = self.queue_class(message["queue"], connection=self.connection,  # type: ignore[attr-defined]
                                     job_class=self.job_class, serializer=self.serializer)
            job, refusal = take_entry(self.job_class, message["job"].encode(), queue, self.connection,
                                      self.serializer)
        except NOT_THE_ENTRY:
            raise
        except Exception:
            logger.exception("work horse %s: a job from the worker could not be read", os.getpid())
            return None
        if job is None:
            logger.warning("work horse %s: job %s not run: %s", os.getpid(), message["job"],
                           refusal.message if refusal else "no such job")
            return None
        setattr(job, PARKED, bool(message.get("parked")))
        job.ferret_resources = getattr(self, "ferret_context", None)  # type: ignore[attr-defined]
        execution = Execution(message["execution"] or "", job.id, self.connection, worker_name=self.name)
        if message.get("created_at") is not None:
            execution.created_at = datetime.datetime.fromtimestamp(message["created_at"], tz=datetime.UTC)
        execution._job = job
        self.executions = {execution.id: execution}
        return job, queue, execution

    def teardown(self) -> None:
        self._reap_detached()  # one still running its job is left to finish it, as RQ leaves its horse
        if self._ferret_horse is not None:
            try:
                self._retire_horse()
            except Exception:
                logger.exception("worker %s: letting its work horse go failed", self.name)
        super().teardown()  # type: ignore[misc]


def _exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited (reaped now, if it had not been)."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


def _close(horse: _Horse) -> None:
    with contextlib.suppress(OSError):
        horse.requests.close()
    with contextlib.suppress(OSError):
        os.close(horse.replies)


def _report_bytes(result: bytes, trace: bytes) -> bytes:
    return b"".join([REPORTED, _LENGTH.pack(len(result)), result, _LENGTH.pack(len(trace)), trace])


def _read_report(fd: int) -> tuple[bytes, bytes]:
    """A reported job's result and trace, read off the pipe (the ``REPORTED`` byte read already)."""
    result = _read_exactly(fd, _LENGTH.unpack(_read_exactly(fd, _LENGTH.size))[0])
    trace = _read_exactly(fd, _LENGTH.unpack(_read_exactly(fd, _LENGTH.size))[0])
    return result, trace


def _read_exactly(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the work horse's pipe closed in the middle of an answer")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
