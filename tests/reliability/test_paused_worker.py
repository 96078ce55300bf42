"""A forking worker paused and resumed (what a VM pause, a container freeze or a debugger does to it) serves
again at once, and stops when told. While the worker is stopped its horse finishes the job in hand and
answers; the worker's heart-beat timer comes due meanwhile, so both arrive together when it resumes: the
answer must not be lost to the timer's signal (it was, and the worker waited for ever on a horse that waited
for its next job). Real redis-server, a real worker process and its horse, a fake Nous over real HTTP whose
searches are slow enough that a pause most often finds the horse mid-job."""

from __future__ import annotations

import os
import signal
import threading
import time

from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import wait_until
from tests.timing import scaled

PAUSES_SECONDS = (2, 7, 3, 12, 2, 6, 4, 16, 3, 30)  # several past the worker's 5 s heart-beat interval


def _steady_stream(producer, stop: threading.Event, statuses: list[str]) -> None:
    """Jobs one after another, each with a deadline no pause reaches: the worker is always busy."""
    while not stop.is_set():
        handle = producer.enqueue({"query": "BTC thesis", "queue": "batch", "deadline_seconds": 600})
        result = producer.wait(handle, 600)
        statuses.append(result.status if result is not None else "no result")


def test_a_busy_fork_worker_paused_ten_times_serves_again_each_time_and_stops_on_sigterm(
        producer, start_workers, sample_nous):
    sample_nous.delay = 0.4  # every search: the horse is mid-job most of the time
    (worker,) = start_workers(1, "--worker-class", "fork", extra_env={
        **nous_env(sample_nous, timeout_seconds=60), "FERRET_PIPELINE__TIMEOUT_SECONDS": "60"})
    stop, statuses = threading.Event(), []
    stream = threading.Thread(target=_steady_stream, args=(producer, stop, statuses), daemon=True)
    stream.start()
    assert wait_until(lambda: len(statuses) >= 2, scaled(60)), "the stream runs"
    late: list[tuple[int, str | None]] = []
    for pause in PAUSES_SECONDS:
        os.kill(worker.pid, signal.SIGSTOP)
        time.sleep(pause)
        os.kill(worker.pid, signal.SIGCONT)
        # served again within seconds: a job with a short deadline, enqueued now, runs before it
        probe = producer.enqueue({"query": "SOL funding", "queue": "batch",
                                  "deadline_seconds": round(scaled(20))})
        result = producer.wait(probe, scaled(60))
        if result is None or result.status != "ok":
            late.append((pause, result.status if result is not None else None))
    stop.set()
    stream.join(scaled(60))
    assert late == [], f"after these pauses (seconds, status) the worker did not serve in time: {late}"
    assert statuses and set(statuses) == {"ok"}, statuses
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=scaled(30)) == 0, "the worker stops on SIGTERM"
