from hypothesis import given
from hypothesis import strategies as st

from ferret.records import Hit, Memory, Section, SubQueryOutcome
from ferret.worker.pipeline.merge import merge_and_select


def _hit(node_id, score, subtype=None):
    return Hit.of(Memory(id=node_id, content_title=node_id, subtype=subtype), score)


def _outcome(index, *hits):
    return SubQueryOutcome(index=index, query=f"q{index}", hits=tuple(hits))


def _merge(outcomes, **kw):
    kw.setdefault("relevance_ratio", 0.4)
    kw.setdefault("max_results", 8)
    return merge_and_select(outcomes, **kw)


def test_dedup_keeps_highest_score_and_its_sub_query():
    merged = _merge([_outcome(0, _hit("n1", 0.3)), _outcome(1, _hit("n1", 0.5))])
    assert [(h.id, h.score, h.sub_query) for h in merged] == [("n1", 0.5, 1)]


def test_dynamic_cutoff_excludes_below_top_times_ratio():
    merged = _merge([_outcome(0, _hit("a", 0.60), _hit("b", 0.25), _hit("c", 0.20))])
    assert [h.id for h in merged] == ["a", "b"]


def test_coverage_guarantee_keeps_one_per_sub_query():
    merged = _merge([_outcome(0, _hit("a", 0.60), _hit("a2", 0.5)), _outcome(1, _hit("b", 0.10))], max_results=2)
    assert [h.id for h in merged] == ["a", "b"]


def test_cutoff_is_per_sub_query():
    # part 1's best (0.10) is far below part 0's, but part 1 is judged against its own top
    merged = _merge([_outcome(0, _hit("a", 0.60), _hit("a2", 0.20)),
                     _outcome(1, _hit("b", 0.10), _hit("c", 0.05), _hit("d", 0.03))])
    assert [h.id for h in merged] == ["a", "b", "c"]


def test_sub_query_lists_are_interleaved_by_rank():
    merged = _merge([_outcome(0, _hit("a", 0.9), _hit("b", 0.8), _hit("c", 0.7)),
                     _outcome(1, _hit("x", 0.5), _hit("y", 0.4))])
    assert [h.id for h in merged] == ["a", "x", "b", "y", "c"]


def test_hard_cap():
    hits = [_hit(f"n{i:02d}", 0.9 - i * 0.01) for i in range(12)]
    assert len(_merge([_outcome(0, *hits)], max_results=8)) == 8


def test_empty_input():
    assert _merge([]) == ()
    assert _merge([_outcome(0), _outcome(1)]) == ()


def test_intent_boost_reorders_but_never_filters():
    signal = _hit("signal", 0.65, "custom:signal")
    lesson = _hit("lesson", 0.70, "custom:lesson")
    strong_lesson = _hit("strong", 0.90, "custom:lesson")
    merged = _merge([_outcome(0, signal, lesson, strong_lesson)],
                    intents=[Section.SIGNALS], intent_boost=1.3)
    assert [h.id for h in merged] == ["strong", "signal", "lesson"]
    boosted = merged[1]
    assert boosted.score == 0.65 * 1.3 and boosted.original_score == 0.65 and boosted.boosted


def test_no_intent_no_boost():
    merged = _merge([_outcome(0, _hit("s", 0.65, "custom:signal"))], intents=[], intent_boost=1.3)
    assert merged[0].score == 0.65 and not merged[0].boosted


_hits = st.lists(
    st.tuples(st.sampled_from([f"n{i}" for i in range(15)]), st.floats(0, 1)), max_size=20
)


@given(groups=st.lists(_hits, min_size=1, max_size=4), cap=st.integers(1, 10),
       ratio=st.floats(0, 1), boost=st.floats(1, 2))
def test_merge_invariants(groups, cap, ratio, boost):
    outcomes = [_outcome(i, *[_hit(n, s, "custom:signal" if n < "n5" else None) for n, s in g])
                for i, g in enumerate(groups)]
    merged = _merge(outcomes, max_results=cap, relevance_ratio=ratio,
                    intents=[Section.SIGNALS], intent_boost=boost)
    ids = [h.id for h in merged]
    assert len(ids) == len(set(ids)), "no duplicate ids"
    assert len(merged) <= cap, "cap respected"

    def boosted(h):
        return h.original_score * (boost if h.memory.subtype else 1)

    groups_with_hits = [o for o in outcomes if o.hits]
    if len(groups_with_hits) == 1:
        assert [h.score for h in merged] == sorted((h.score for h in merged), reverse=True), "sorted"
    if groups_with_hits and len(groups_with_hits) <= cap:
        best = max(boosted(h) for o in outcomes for h in o.hits)
        assert max(h.score for h in merged) >= best - 1e-9, "the single best survives"
        for outcome in groups_with_hits:
            top = max(boosted(h) for h in outcome.hits)
            tops = {h.id for h in outcome.hits if boosted(h) == top}
            assert tops & set(ids), "coverage: every sub-query that found anything is represented"
    for h in merged:
        assert h.original_score <= 1.0 and h.score >= h.original_score


def test_asked_for_k_the_good_candidates_under_the_cutoff_come_back_up_to_k():
    hits = [_hit("a", 0.60), _hit("b", 0.25), _hit("c", 0.20), _hit("d", 0.12), _hit("e", 0.05)]
    assert [h.id for h in _merge([_outcome(0, *hits)], good_score=0.1)] == ["a", "b", "c", "d"]
    assert [h.id for h in _merge([_outcome(0, *hits)], good_score=0.1, max_results=3)] == ["a", "b", "c"]
    assert [h.id for h in _merge([_outcome(0, *hits)], good_score=None)] == ["a", "b"], "the cutoff alone"


def test_the_good_candidates_come_back_interleaved_after_what_the_cutoff_kept():
    first = _outcome(0, _hit("a", 0.9), _hit("a2", 0.2))
    second = _outcome(1, _hit("b", 0.5), _hit("b2", 0.15))
    assert [h.id for h in _merge([first, second], good_score=0.1)] == ["a", "b", "a2", "b2"]


def test_each_round_follows_the_order_the_question_asked_its_parts():
    first = _outcome(0, _hit("a1", 0.3), _hit("a2", 0.2))
    second = _outcome(1, _hit("b1", 0.9), _hit("b2", 0.8))
    assert [h.id for h in _merge([first, second], relevance_ratio=0.0)] == ["a1", "b1", "a2", "b2"]
