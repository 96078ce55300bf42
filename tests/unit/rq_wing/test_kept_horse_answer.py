"""The kept horse's answer read by its worker (``ferret.rq_layer.kept_horse``): RQ's monitor interrupts the
worker's wait with its timer to send heart-beats. An answer already read when the timer's exception comes is
kept, and the wait called again after the heart-beat returns it: it does not wait for an answer the horse
has already given (its pipe is empty; the horse waits for the next job)."""

from __future__ import annotations

import contextlib
import os

import pytest
from rq.timeouts import HorseMonitorTimeoutException

from ferret.rq_layer import kept_horse
from ferret.rq_layer.kept_horse import RAN, KeptHorse, _Horse, _report_bytes


class _Worker(KeptHorse):
    ferret_jobs_per_horse = 100
    name = "worker-under-test"


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
    horse = _Horse(pid=os.getpid(), requests=None, replies=read_end)  # type: ignore[arg-type]
    horse.hand_over(job_id)
    worker._ferret_horse = horse
    return worker, horse


def test_a_report_read_when_the_timer_struck_is_returned_by_the_next_wait(pipe, monkeypatch):
    read_end, write_end = pipe
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    os.write(write_end, _report_bytes(b'{"job_id": "job-1"}', b""))
    struck = []

    @contextlib.contextmanager
    def timer_strikes_once_released():  # the timer's signal, held while the rest was read, lands at the end
        yield
        if not struck:
            struck.append(True)
            raise HorseMonitorTimeoutException()

    monkeypatch.setattr(kept_horse, "_timer_held", timer_strikes_once_released)
    with pytest.raises(HorseMonitorTimeoutException):
        worker.wait_for_horse()
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)  # kept, not read again
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)
    assert horse.served == 1 and not horse.busy
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
    with pytest.raises(BlockingIOError):
        worker.wait_for_horse()


def test_a_horse_gone_in_the_middle_of_its_report_leaves_the_result_to_be_read_back(pipe):
    read_end, write_end = pipe
    worker, horse = _worker_with_a_job_handed_over(read_end, "job-1")
    os.write(write_end, _report_bytes(b'{"job_id": "job-1"}', b"")[:9])
    os.close(write_end)  # the horse died sending the rest
    assert worker.wait_for_horse() == (horse.pid, os.EX_OK, None)  # it ran: RQ recorded its success or failure
    assert worker.piped_report(_job("job-1")) is None
