from ferret.records import Hit, Memory
from ferret.worker.pipeline.classify import classify
from ferret.worker.pipeline.quality_gate import is_weak, merge_by_id, reformulate


def _hit(node_id, score):
    return Hit.of(Memory(id=node_id, content_title=node_id), score)


def test_seed_reformulation_table():
    assert reformulate("What's BTC support level?", None) == "BTC support level"
    assert reformulate("How does funding rate affect price?", None) == "funding rate affect price"
    assert reformulate("BTC", None) is None


def test_entity_fallback_when_nothing_left():
    assert reformulate("What is SOLANA?", classify("What is SOLANA?")) == "SOLANA"


def test_weakness():
    assert is_weak([], 0.2)
    assert is_weak([_hit("a", 0.1)], 0.2)
    assert not is_weak([_hit("a", 0.45)], 0.2)


def test_retry_merges_by_id_keeping_higher_score():
    merged = merge_by_id([_hit("A", 0.1), _hit("B", 0.15)], [_hit("B", 0.3), _hit("C", 0.2)])
    assert [(h.id, h.score) for h in merged] == [("B", 0.3), ("C", 0.2), ("A", 0.1)]
