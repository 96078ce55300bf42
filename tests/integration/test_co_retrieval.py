"""Co-retrieval strengthening through real workers: local weights and Nous edges."""

from __future__ import annotations

import time

import pytest

from ferret.worker.co_retrieval.affinity import RedisAffinity
from ferret.worker.co_retrieval.groups import groups_of
from ferret.worker.fakes.nous_server import nous_env
from tests.conftest import free_port
from tests.integration.test_metrics import wait_for_metrics

COMPOUND = "What's my BTC thesis and how did my last SOL trade go?"
ON = {"FERRET_CO_RETRIEVAL__ENABLED": "true"}


def _eventually(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)


def _ask(producer, namespace, query, **extra):
    return producer.wait(producer.enqueue({"query": query, "namespace": namespace, **extra}), 20)


@pytest.mark.parametrize("worker_class", ["simple", "fork"])
def test_local_weights_grow_within_sub_query_groups_only(worker_class, producer, sample_namespace,
                                                          start_workers, redis_client):
    port = free_port()
    start_workers(1, "--metrics-port", str(port), "--worker-class", worker_class, extra_env=ON)
    result = _ask(producer, sample_namespace, COMPOUND)
    assert result.status == "ok"  # strengthened by co_retrieval.amount (0.03), asserted on the weights below
    groups = groups_of(result.results, 10)
    assert len(groups) == 2, "a compound question gives two groups"
    affinity = RedisAffinity(redis_client, sample_namespace)
    first, second = groups
    _eventually(lambda: affinity.weights([first[0]])[first[0]])
    weights = affinity.weights(first + second)
    for member in first:
        assert weights[member] == pytest.approx({p: 0.03 for p in first if p != member})
    for member in second:
        assert not set(weights[member]) & set(first) - set(second), "no link across sub-queries"
    metrics = wait_for_metrics(port)
    assert metrics[("ferret_co_retrieval_jobs_total", (("outcome", "applied"),))] == 1
    pairs = sum(len(g) * (len(g) - 1) // 2 for g in groups)
    assert metrics[("ferret_co_retrieval_links_total", ())] == pairs


def test_explicit_recall_strengthens_more_and_batch_not_at_all(producer, sample_namespace, start_workers,
                                                                redis_client):
    start_workers(1, extra_env=ON)
    affinity = RedisAffinity(redis_client, sample_namespace)
    batch = _ask(producer, sample_namespace, "BTC thesis", queue="batch")
    assert batch.status == "ok"
    explicit = _ask(producer, sample_namespace, "BTC thesis", options={"recall": "explicit"})
    top, second = explicit.results[0].id, explicit.results[1].id
    _eventually(lambda: affinity.weights([top])[top].get(second) is not None)
    assert affinity.weights([top])[top][second] == pytest.approx(0.05), "the batch job added nothing"
    cached = _ask(producer, sample_namespace, "BTC thesis", options={"recall": "explicit"})
    assert cached.stats.cache_hit
    # Strengthening is applied in submission order: once a later job's is in, the hit's would be too.
    later = _ask(producer, sample_namespace, "SOL trade", options={"recall": "explicit"})
    a, b = later.results[0].id, later.results[1].id
    _eventually(lambda: affinity.weights([a])[a].get(b) is not None)
    assert affinity.weights([top])[top][second] == pytest.approx(0.05), "the cache hit added nothing"


def test_nous_edges_within_a_group_are_strengthened_off_the_critical_path(
        producer, start_workers, sample_nous):
    start_workers(1, extra_env={**ON, **nous_env(sample_nous)})
    result = _ask(producer, "default", COMPOUND)
    first, second = groups_of(result.results, 10)
    listed = lambda: sum(path.startswith("/v1/edges?") for path, _ in sample_nous.requests)  # noqa: E731
    _eventually(lambda: listed() == len(first) + len(second))  # the first job's pass: no edges yet
    sample_nous.add_edge("inside", first[0], first[1])
    sample_nous.add_edge("across", first[0], second[0])
    sample_nous.add_edge("inside-2", second[1], second[0])
    again = _ask(producer, "default", COMPOUND.replace("?", " ?"), options={"recall": "explicit"})
    assert groups_of(again.results, 10) == [first, second]
    _eventually(lambda: len(sample_nous.strengthened) == 2)
    assert sorted(sample_nous.strengthened) == [("inside", 0.05), ("inside-2", 0.05)]
    assert sample_nous.edges["across"]["strength"] == 0.5
