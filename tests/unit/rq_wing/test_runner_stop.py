"""A stop signal while the worker records a finished job, or reaps lost ones, still stops it."""

from __future__ import annotations

import signal

import fakeredis
import pytest
from rq.exceptions import StopRequested

from ferret.contract import RetrievalResult
from ferret.producer.client import Producer
from ferret.rq_layer import worker_classes
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.worker.metrics import FerretMetrics


class StopWhileRecording(FerretMetrics):
    """SIGTERM lands while the first finished job's metrics are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.worker: object = None
        self.recorded: list[str] = []

    def _record(self, result: RetrievalResult, backend: str) -> None:
        if not self.recorded:
            self.worker.request_stop(signal.SIGTERM, None)  # type: ignore[attr-defined]
        super()._record(result, backend)
        self.recorded.append(result.job_id)


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


@pytest.fixture
def settings():
    return load_settings(environ={})


def test_a_stop_signal_while_a_finished_job_is_recorded_stops_the_worker_after_that_job(
        client, settings, monkeypatch):
    metrics = StopWhileRecording()
    worker = build_worker(client, settings, metrics=metrics)
    metrics.worker = worker
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # RQ re-arms handlers: keep pytest's
    producer = Producer(client, settings)
    first = producer.enqueue({"query": "BTC thesis", "queue": "prefetch"})
    second = producer.enqueue({"query": "SOL trade", "queue": "prefetch"})
    worker.work(burst=True, with_scheduler=False)
    assert metrics.recorded == [first.job_id]  # recorded whole, and the stop was heard
    assert producer.result(first).status == "ok"
    assert producer.result(second) is None  # not taken: the worker stopped after the first job
    assert worker.queues[0].job_ids == [second.job_id]


def test_a_stop_signal_while_lost_jobs_are_reaped_reaches_rq(client, settings, monkeypatch):
    worker = build_worker(client, settings)

    def stop_arrives(context, queues, on_refused=None):
        raise StopRequested  # what RQ's handler raises at an idle worker
        yield

    monkeypatch.setattr(worker_classes, "reap", stop_arrives)
    with pytest.raises(StopRequested):
        worker.run_maintenance_tasks()


def test_a_stop_while_rq_starts_up_on_a_silent_redis_ends_within_the_bound(client, settings, monkeypatch):
    """RQ registers the worker, then subscribes (a wait on Redis) before it installs its handlers: a stop
    asked then, while Redis never answers, is watched as any stop is and ends the process."""
    import threading

    from ferret.rq_layer import worker_stops

    worker = build_worker(client, settings)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # RQ re-arms handlers: keep pytest's
    monkeypatch.setattr(worker_stops, "STOP_BOUND_SECONDS", 0.2)
    exited = threading.Event()
    monkeypatch.setattr(worker_stops.os, "_exit", lambda code: exited.set())

    def subscribe_to_a_silent_redis() -> None:
        worker.request_stop_early(signal.SIGTERM, None)  # the handler runs while the start-up waits
        exited.wait(30)  # Redis never answers: only the watchdog ends this

    monkeypatch.setattr(worker, "subscribe", subscribe_to_a_silent_redis)
    worker.work(burst=True, with_scheduler=False)
    assert exited.is_set()
    assert worker.ferret_stop_signal == signal.SIGTERM
