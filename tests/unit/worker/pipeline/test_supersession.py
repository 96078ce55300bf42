"""A memory that names the memories it replaces ranks above each of them (``worker.pipeline.supersession``):
the old one stays, below, marked; its successor is put in its place when only the old one was found."""

from __future__ import annotations

from ferret.records import Hit, Memory
from ferret.worker.pipeline.supersession import newest, successors_first, superseded_ids


def _memory(memory_id: str, *supersedes: str) -> Memory:
    return Memory(id=memory_id, content_title=f"memory {memory_id}", supersedes=list(supersedes))


def _hits(*ids: str) -> list[Hit]:
    return [Hit.of(_memory(memory_id), 1.0 - i / 10) for i, memory_id in enumerate(ids)]


def _order(hits) -> list[tuple[str, str | None]]:
    return [(hit.id, hit.superseded_by) for hit in hits]


def test_a_successor_found_below_its_old_memory_takes_its_place():
    moved = _memory("lisbon", "berlin")
    ranked = successors_first(_hits("berlin", "whales", "lisbon"), {"berlin": moved})
    assert _order(ranked) == [("lisbon", None), ("berlin", "lisbon"), ("whales", None)]


def test_a_successor_not_found_is_put_in_place_and_the_list_keeps_its_length():
    moved = _memory("lisbon", "berlin")
    ranked = successors_first(_hits("berlin", "whales", "dinner"), {"berlin": moved})
    assert _order(ranked) == [("lisbon", None), ("berlin", "lisbon"), ("whales", None)]
    assert ranked[0].score == ranked[1].score  # at the old memory's rank


def test_a_chain_is_followed_to_its_newest_memory_and_a_cycle_ends():
    b, c = _memory("b", "a"), _memory("c", "b")
    assert newest("a", {"a": b, "b": c}).id == "c"
    ranked = successors_first(_hits("a", "x"), {"a": b, "b": c})
    assert _order(ranked) == [("c", None), ("a", "c")]
    looping = {"a": _memory("b", "a"), "b": _memory("a", "b")}
    assert newest("a", looping).id == "b"


def test_nothing_replaced_changes_nothing():
    hits = _hits("a", "b", "c")
    assert successors_first(hits, {}) == tuple(hits)
    assert successors_first(hits, {"zzz": _memory("y", "zzz")}) == tuple(hits)


def test_the_write_paths_map_names_each_old_memory_by_its_successor():
    assert superseded_ids([_memory("lisbon", "berlin", "paris"), _memory("x")]) == {"berlin": "lisbon",
                                                                                  "paris": "lisbon"}
    assert superseded_ids([_memory("self", "self")]) == {}
