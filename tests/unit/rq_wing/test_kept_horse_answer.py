"""The kept horse's answer read by its worker (``ferret.rq_layer.kept_horse``, ``ferret.rq_layer.horse_wait``):
RQ's monitor bounds the worker's wait with its timer (``SIGALRM``, whose handler raises) to send heart-beats.
The timer's signal never loses an answer: not when another thread of the worker takes it while the worker
waits in its read (the wedge: the worker then waited for ever on a horse that waited for its next job), not
when it comes in the middle of a report. A wait with no answer ends by itself at the monitor's interval; an
answer read is kept, and the wait called again returns it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from rq.timeouts import HorseMonitorTimeoutException, UnixSignalDeathPenalty

from ferret.rq_layer.kept_horse import RAN, REPORTED, KeptHorse, _Horse, _report_bytes


class _Worker(KeptHorse):
    ferret_jobs_per_horse = 100
    name = "worker-under-test"
    job_monitoring_interval = 5


def _job(job_id: str):
    return type("Job", (), {"id": job_id})()


@pytest.fixture
def pipe():
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)  # a wait for an answer never coming raises instead of hanging the test
    yield read_end, write_end
    for end in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(end)


def _worker_with_a_job_handed_over(read_end: int, job_id: str) -> tuple[_Worker, _Horse]:
    worker = _Worker()
    horse = _Horse(pid=os.getpid(), requests=open(os.devnull, "wb"), replies=read_end)  # noqa: SIM115
    horse.hand_over(job_id)
    worker._ferret_horse = horse
    return worker, horse


def _sleeping(thread_id: int) -> bool:
    """Whether the thread (its native id) sleeps in the kernel: the worker's wait has begun."""
    return Path(f"/proc/self/task/{thread_id}/stat").read_text().rsplit(")", 1)[1].split()[0] == "S"


def _monitored_waits(worker: _Worker) -> list[object]:
    """What RQ's monitor does: the wait within its timer, again after each of the timer's exceptions."""
    seen: list[object] = []
    for _ in range(3):
        try:
            with UnixSignalDeathPenalty(worker.job_monitoring_interval, HorseMonitorTimeoutException):
                seen.append(worker.wait_for_horse())
            return seen
        except HorseMonitorTimeoutException:
            seen.append("timer")
    return seen


def test_the_timer_taken_by_another_thread_while_the_worker_waits_loses_no_answer(pipe):
    """The kernel gives the timer's signal to another thread (the job pulse's) while the worker's main
    thread waits; the horse's answer comes after it. Python runs the handler in the main thread as soon as
    its wait returns: had the wait been a read, the byte read would be lost with the raise."""
    read_end, write_end = pipe
    os.set_blocking(read_end, True)
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    main = threading.get_native_id()

    def signal_then_answer() -> None:
        while not _sleeping(main):
            time.sleep(0.01)
        signal.pthread_kill(threading.get_ident(), signal.SIGALRM)  # this thread takes it
        os.write(write_end, RAN)
        time.sleep(1.0)
        os.close(write_end)  # an answer lost leaves the worker an empty pipe: it then sees its end, not a hang

    other = threading.Thread(target=signal_then_answer)
    other.start()
    seen = _monitored_waits(worker)
    other.join()
    assert seen[-1] == (horse.pid, os.EX_OK, None), seen
    assert horse.served == 1 and not horse.busy


def test_a_wait_with_no_answer_ends_at_the_monitors_interval_and_the_next_returns_it(pipe):
    read_end, write_end = pipe
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    worker.job_monitoring_interval = 0.05  # type: ignore[assignment]
    with pytest.raises(HorseMonitorTimeoutException):  # no timer at all: the wait's own bound ends it
        worker.wait_for_horse()
    os.write(write_end, _report_bytes(b'{"job_id": "job-1"}', b""))
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)  # kept, not read again
    assert horse.served == 1 and not horse.busy and horse.reply == REPORTED
    assert worker.piped_report(_job("job-1")) == (b'{"job_id": "job-1"}', b"")
    assert worker.piped_report(_job("job-2")) is None  # another job's answer: not this one


def test_a_plain_answer_is_kept_too_and_the_next_job_starts_afresh(pipe):
    read_end, write_end = pipe
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    os.write(write_end, RAN)
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)
    assert worker.piped_report(_job("job-1")) is None  # the result is read back instead
    horse.hand_over("job-2")  # the next job: its answer is still to come
    worker.job_monitoring_interval = 0.05  # type: ignore[assignment]
    with pytest.raises(HorseMonitorTimeoutException):
        worker.wait_for_horse()


def test_a_horse_gone_in_the_middle_of_its_report_leaves_the_result_to_be_read_back(pipe):
    read_end, write_end = pipe
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    os.write(write_end, _report_bytes(b'{"job_id": "job-1"}', b"")[:9])
    os.close(write_end)  # the horse died sending the rest
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)  # it ran: RQ recorded its success or failure
    assert worker.piped_report(_job("job-1")) is None
