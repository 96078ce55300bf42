"""Commits of staged index changes reach Prometheus: on a job's path and after one (a simple worker)."""

from __future__ import annotations

import fakeredis

from ferret.producer.client import Producer
from ferret.records import Memory
from ferret.rq_layer.runner import build_worker
from ferret.settings import load_settings
from ferret.worker.backends.local import MemoryStore
from ferret.worker.metrics import FerretMetrics


def _value(metrics: FerretMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def _run_one(worker, producer: Producer, query: str) -> None:
    job = producer.enqueue({"query": query, "namespace": "ns", "options": {"cache": False}})
    worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
    assert producer.result(job).status == "ok"


def test_folds_after_a_job_and_on_its_path_are_counted_with_their_time(tmp_path):
    client = fakeredis.FakeRedis()
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin thesis")])
    metrics = FerretMetrics()
    after = load_settings(environ={"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path / "after"),
                                   "FERRET_BACKEND__LOCAL__FOLD_SECONDS": "0"})
    worker, producer = build_worker(client, after, metrics=metrics), Producer(client, after)
    _run_one(worker, producer, "bitcoin")  # builds the index: one memory, staged, folded once the result is written
    assert _value(metrics, "ferret_index_folded_changes_total", when="after_job") == 1
    store.upsert([Memory(id="b", content_title="bitcoin zebra")])
    _run_one(worker, producer, "zebra")  # stages b; the staging is old enough once the result is written
    assert _value(metrics, "ferret_index_folded_changes_total", when="after_job") == 2
    assert _value(metrics, "ferret_index_fold_seconds_count", when="after_job") == 2
    assert _value(metrics, "ferret_index_folded_changes_total", when="job") == 0

    on_path = load_settings(environ={"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path / "path"),
                                     "FERRET_BACKEND__LOCAL__FOLD_CHANGES": "1"})
    worker, producer = build_worker(client, on_path, metrics=metrics), Producer(client, on_path)
    _run_one(worker, producer, "bitcoin")
    store.upsert([Memory(id="c", content_title="bitcoin yak")])
    _run_one(worker, producer, "yak")  # fold_changes reached: committed before the search
    assert _value(metrics, "ferret_index_folded_changes_total", when="job") == 1
    assert _value(metrics, "ferret_index_fold_seconds_count", when="job") == 1
    assert _value(metrics, "ferret_index_fold_seconds_sum", when="job") > 0


def test_a_fold_taken_from_another_workers_commit_is_counted_as_taken(tmp_path):
    client = fakeredis.FakeRedis()
    store = MemoryStore(client, "ns")
    store.upsert([Memory(id="a", content_title="bitcoin thesis"), Memory(id="b", content_title="bitcoin zebra")])
    metrics = FerretMetrics()
    settings = load_settings(environ={"FERRET_BACKEND__LOCAL__INDEX_DIR": str(tmp_path),  # one host's base
                                      "FERRET_BACKEND__LOCAL__FOLD_CHANGES": "1"})
    first = build_worker(client, settings, metrics=metrics)
    second = build_worker(client, settings, metrics=metrics)
    producer = Producer(client, settings)
    _run_one(first, producer, "bitcoin")  # built
    _run_one(second, producer, "bitcoin")  # the first one's copy, taken
    store.upsert([Memory(id="c", content_title="bitcoin yak")])
    _run_one(first, producer, "yak")  # fold_changes reached: committed
    assert _value(metrics, "ferret_index_folds_taken_total", when="job") == 0
    _run_one(second, producer, "yak")  # the same fold: the first one's commit, taken
    assert _value(metrics, "ferret_index_folded_changes_total", when="job") == 2
    assert _value(metrics, "ferret_index_folds_taken_total", when="job") == 1
