from hypothesis import given
from hypothesis import strategies as st

from worker.pipeline.merge import merge_and_select
from worker.pipeline.records import Hit, Memory, Section, SubQueryOutcome


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
    merged = _merge([_outcome(0, _hit("a", 0.60)), _outcome(1, _hit("b", 0.10), _hit("c", 0.05))])
    assert [h.id for h in merged] == ["a", "b"]


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
    assert [h.score for h in merged] == sorted((h.score for h in merged), reverse=True), "sorted"
    all_hits = [h for o in outcomes for h in o.hits]
    if all_hits:
        best = max(all_hits, key=lambda h: h.original_score * (boost if h.memory.subtype else 1))
        assert merged and merged[0].score >= best.original_score * (boost if best.memory.subtype else 1) - 1e-9
    groups_with_hits = {h.sub_query for h in merged}
    owners: dict[str, int] = {}
    for o in outcomes:
        for h in o.hits:
            adjusted = h.original_score * (boost if h.memory.subtype else 1)
            if h.id not in owners or adjusted > owners[h.id][1]:
                owners[h.id] = (o.index, adjusted)
    owning_groups = {g for g, _ in owners.values()}
    if len(owning_groups) <= cap:
        assert owning_groups <= groups_with_hits, "coverage guarantee holds"
    for h in merged:
        assert h.original_score <= 1.0
