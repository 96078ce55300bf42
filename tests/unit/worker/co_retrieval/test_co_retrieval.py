import threading
from dataclasses import dataclass

import fakeredis
import pytest

from ferret.contract import RetrievalRequest, RetrievalResult, Timestamps
from ferret.records import Filters, Hit, Memory
from ferret.settings import CoRetrievalSettings
from ferret.stats import JobStats
from ferret.worker.backends.local import LocalBackends, MemoryStore
from ferret.worker.co_retrieval.affinity import InMemoryAffinity, RedisAffinity, with_affinity
from ferret.worker.co_retrieval.applier import CoRetrievalApplier, co_retrieval_amount
from ferret.worker.co_retrieval.groups import groups_of, pairs


@dataclass
class Item:
    id: str
    sub_query: int


def _hit(node_id, score):
    return Hit.of(Memory(id=node_id, content_title=f"note {node_id}"), score)


def test_groups_are_per_sub_query_capped_and_singletons_dropped():
    items = [Item("a", 0), Item("x", 1), Item("b", 0), Item("c", 0), Item("a", 0), Item("z", 2), Item("y", 1)]
    assert groups_of(items, max_size=2) == [["a", "b"], ["x", "y"]]
    assert groups_of(items, max_size=10) == [["a", "b", "c"], ["x", "y"]]


def test_pairs_never_cross_groups():
    assert pairs([["a", "b", "c"], ["x", "y"]]) == {("a", "b"), ("a", "c"), ("b", "c"), ("x", "y")}


@pytest.mark.parametrize("make", [lambda: InMemoryAffinity(), lambda: RedisAffinity(fakeredis.FakeRedis(), "ns")])
def test_weights_are_symmetric_grow_and_cap_at_one(make):
    affinity = make()
    assert affinity.strengthen([["a", "b", "c"], ["x", "y"]], 0.3) == 4
    for _ in range(3):
        affinity.strengthen([["a", "b"]], 0.3)
    weights = affinity.weights(["a", "b", "x", "q"])
    assert weights["a"] == pytest.approx({"b": 1.0, "c": 0.3})
    assert weights["b"] == pytest.approx({"a": 1.0, "c": 0.3})
    assert weights["x"] == pytest.approx({"y": 0.3}) and weights["q"] == {}
    assert "x" not in weights["a"], "no link across groups"


def test_bonus_lifts_a_partner_of_the_top_hit_and_keeps_the_lexical_score():
    hits = [_hit("a", 0.8), _hit("b", 0.5), _hit("c", 0.45)]
    out = with_affinity(hits, {"a": {"c": 1.0}}, weight=0.1, seeds=10)
    assert [h.id for h in out] == ["a", "c", "b"]
    assert out[1].score == pytest.approx(0.45 + 0.1 * 1.0 * 0.8) and out[1].original_score == 0.45
    assert with_affinity(hits, {}, weight=0.1, seeds=10) == hits


def test_only_the_seeds_lend_a_bonus_and_never_to_themselves():
    hits = [_hit("a", 0.8), _hit("b", 0.5), _hit("c", 0.45)]
    out = with_affinity(hits, {"a": {"a": 1.0}, "c": {"b": 1.0}}, weight=0.5, seeds=1)
    assert [h.score for h in out] == [0.8, 0.5, 0.45]


def test_local_backend_uses_the_weights_only_when_switched_on():
    client = fakeredis.FakeRedis()
    MemoryStore(client, "ns").upsert([Memory(id="a", content_title="bitcoin halving thesis"),
                                      Memory(id="b", content_title="bitcoin"),
                                      Memory(id="c", content_title="bitcoin ferry")])
    RedisAffinity(client, "ns").strengthen([["a", "c"]], 1.0)
    plain = LocalBackends(client).for_namespace("ns").search("bitcoin halving", 5, Filters())
    on = LocalBackends(client, CoRetrievalSettings(enabled=True, affinity_weight=0.5)).for_namespace("ns")
    boosted = on.search("bitcoin halving", 5, Filters())
    assert plain[0].id == boosted[0].id == "a"
    assert [h.id for h in plain][1:] == ["b", "c"] and [h.id for h in boosted][1:] == ["c", "b"]


def test_clearing_a_namespace_drops_its_weights_only():
    client = fakeredis.FakeRedis()
    RedisAffinity(client, "ns").strengthen([["a", "b"]], 0.1)
    RedisAffinity(client, "other").strengthen([["a", "b"]], 0.1)
    MemoryStore(client, "ns").clear()
    assert RedisAffinity(client, "ns").weights(["a"]) == {"a": {}}
    assert RedisAffinity(client, "other").weights(["a"])["a"] == pytest.approx({"b": 0.1})


def _request(**fields):
    return RetrievalRequest.model_validate({"query": "q", **fields})


def test_the_job_decides_the_amount():
    on = CoRetrievalSettings(enabled=True)
    assert co_retrieval_amount(CoRetrievalSettings(), _request()) is None
    assert co_retrieval_amount(on, _request()) == 0.03
    assert co_retrieval_amount(on, _request(options={"recall": "explicit"})) == 0.05
    assert co_retrieval_amount(on, _request(queue="batch")) is None
    assert co_retrieval_amount(on.model_copy(update={"on_batch": True}), _request(queue="batch")) == 0.03


def _result(amount, items=(("a", 0), ("b", 0), ("x", 1))):
    results = [{"id": i, "score": 0.5, "original_score": 0.5, "section": "KNOWLEDGE", "subtype": None,
                "sub_query": g, "sub_query_text": None, "title": i, "preview": "", "date": None} for i, g in items]
    return RetrievalResult(job_id="j", namespace="ns", queue="prefetch", status="ok", results=results,
                           timestamps=Timestamps(enqueued_at=0, deadline_at=1)), amount


def test_applier_strengthens_off_thread_and_observes():
    calls, observed = [], []
    applier = CoRetrievalApplier(lambda ns, groups, amount: calls.append((ns, groups, amount,
                                 threading.current_thread().name)) or 1,
                                 max_group_size=10, max_pending=10, observe=lambda o, n: observed.append((o, n)))
    assert applier.submit(*_result(0.03))
    assert not applier.submit(*_result(None)), "the job did not ask for it"
    assert not applier.submit(*_result(0.03, items=(("a", 0), ("x", 1)))), "no group of two"
    hit, amount = _result(0.03)
    assert not applier.submit(hit.model_copy(update={"stats": JobStats(cache_hit=True)}), amount), "a cache hit"
    assert applier.drain(5)
    assert calls == [("ns", [["a", "b"]], 0.03, "ferret-co-retrieval")]
    assert observed == [("applied", 1)]


def test_applier_counts_failures_and_drops_when_full():
    gate = threading.Event()
    observed = []

    def strengthen(ns, groups, amount):
        gate.wait(5)
        raise RuntimeError("nous down")

    applier = CoRetrievalApplier(strengthen, max_group_size=10, max_pending=1,
                                 observe=lambda o, n: observed.append(o))
    assert applier.submit(*_result(0.03))  # taken by the thread, blocked on the gate
    deadline_ok = [applier.submit(*_result(0.03)) for _ in range(3)]
    assert deadline_ok.count(False) >= 2, "past max_pending, dropped"
    gate.set()
    assert applier.drain(5)
    assert observed.count("dropped") == deadline_ok.count(False)
    assert observed.count("failed") == 1 + deadline_ok.count(True)
