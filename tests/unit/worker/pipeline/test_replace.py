from hypothesis import given
from hypothesis import strategies as st

from ferret.records import Hit, Memory
from ferret.worker.pipeline.replace import replace_weak


def _hit(node_id, score, sub_query=0, title=None):
    return Hit(Memory(id=node_id, content_title=title or f"title {node_id}"), score, score, sub_query)


class _Search:
    def __init__(self, answers=None, fail=False):
        self.answers = answers or {}
        self.fail = fail
        self.calls = []

    def __call__(self, query, limit):
        self.calls.append(query)
        if self.fail:
            raise RuntimeError("backend down")
        return self.answers.get(query, [])


def test_replaces_below_floor_with_better_unseen_candidate():
    search = _Search({"title weak": [_hit("better", 0.35)]})
    out = replace_weak([_hit("top", 0.6), _hit("weak", 0.15)], search, floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["top", "better"]
    assert (out.attempted, out.successful) == (1, 1)


def test_drops_when_no_better_candidate():
    # on the same search the weak hit scores 0.5: "worse" (0.4) is not better, "top" is already in
    search = _Search({"title weak": [_hit("top", 0.9), _hit("weak", 0.5), _hit("worse", 0.4)]})
    out = replace_weak([_hit("top", 0.6), _hit("weak", 0.15)], search, floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["top"]
    assert out.dropped == ("weak",) and (out.attempted, out.successful) == (1, 0)


def test_candidates_are_compared_on_the_same_search():
    search = _Search({"title weak": [_hit("weak", 0.7), _hit("better", 0.8)]})
    out = replace_weak([_hit("top", 0.6), _hit("weak", 0.15)], search, floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["top", "better"] and out.successful == 1


def test_replacement_search_asks_the_sub_query_with_the_hit_words():
    search = _Search()
    replace_weak([_hit("top", 0.6), _hit("weak", 0.15)], search, floor=0.25, max_replacements=2,
                 sub_queries=["when did Jon travel"])
    assert search.calls == ["when did Jon travel title weak"]


def test_max_replacements_cap_and_unexamined_weak_hits_are_kept():
    hits = [_hit("top", 0.9)] + [_hit(f"w{i}", 0.1) for i in range(5)]
    search = _Search()
    out = replace_weak(hits, search, floor=0.25, max_replacements=2)
    assert len(search.calls) == 2 and out.attempted == 2
    assert [h.id for h in out.hits] == ["top", "w2", "w3", "w4"] and out.dropped == ("w0", "w1")


def test_never_drops_below_min_results():
    hits = [_hit("top", 0.9), _hit("w0", 0.1), _hit("w1", 0.1)]
    out = replace_weak(hits, _Search(), floor=0.25, max_replacements=2, min_results=2)
    assert [h.id for h in out.hits] == ["top", "w1"] and out.dropped == ("w0",)


def test_above_floor_kept_unchanged():
    hits = [_hit("a", 0.9), _hit("b", 0.3)]
    search = _Search()
    out = replace_weak(hits, search, floor=0.25, max_replacements=2)
    assert out.hits == tuple(hits) and search.calls == []


def test_safety_keeps_the_single_best():
    out = replace_weak([_hit("a", 0.1), _hit("b", 0.05)], _Search(), floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["a"]


def test_best_of_each_sub_query_survives():
    hits = [_hit("a", 0.9, 0), _hit("b", 0.1, 1), _hit("c", 0.05, 1)]
    out = replace_weak(hits, _Search(), floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["a", "b"]


def test_failed_replacement_search_keeps_the_hit():
    out = replace_weak([_hit("a", 0.9), _hit("b", 0.1)], _Search(fail=True), floor=0.25, max_replacements=2)
    assert [h.id for h in out.hits] == ["a", "b"] and out.attempted == 1


def test_no_time_no_search():
    search = _Search()
    out = replace_weak([_hit("a", 0.9), _hit("b", 0.1)], search, floor=0.25, max_replacements=2,
                       has_time=lambda: False)
    assert search.calls == [] and [h.id for h in out.hits] == ["a", "b"]


@given(scores=st.lists(st.floats(0, 1), min_size=1, max_size=12), cap=st.integers(0, 4))
def test_the_single_best_always_survives(scores, cap):
    hits = sorted((_hit(f"n{i}", s) for i, s in enumerate(scores)), key=lambda h: (-h.score, h.id))
    out = replace_weak(hits, _Search(), floor=0.25, max_replacements=cap)
    assert hits[0] in out.hits
    assert out.attempted <= cap


def test_a_weak_but_good_candidate_is_replaced_by_better_but_never_dropped_for_nothing():
    hits = [_hit("top", 0.6), _hit("good", 0.15), _hit("noise", 0.05)]
    out = replace_weak(hits, _Search(), floor=0.25, max_replacements=2, good_score=0.1)
    assert [h.id for h in out.hits] == ["top", "good"] and out.dropped == ("noise",)
    better = _Search({"title good": [_hit("better", 0.35)]})
    out = replace_weak(hits, better, floor=0.25, max_replacements=2, good_score=0.1)
    assert [h.id for h in out.hits] == ["top", "better"]
