import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferret.errors import RerankFailed
from ferret.records import Hit, Memory
from ferret.worker.pipeline.rerank import blend, build_messages, parse_scores, strip_thinking


def _hit(node_id, score, body=""):
    return Hit.of(Memory(id=node_id, content_title=f"title {node_id}", content_body=body), score)


def test_prompt_numbers_every_candidate_and_shortens_long_previews():
    hits = [_hit("a", 0.9, "short body"), _hit("b", 0.5, "word " * 200)]
    system, user = build_messages("What is A?", hits, preview_chars=50)
    assert system["role"] == "system" and "JSON" in system["content"]
    assert user["content"].startswith("Query: What is A?")
    assert "[1] title a: short body" in user["content"]
    line_b = next(line for line in user["content"].splitlines() if line.startswith("[2] "))
    assert line_b.endswith("…") and len(line_b) < 80
    assert "2 snippets" in user["content"]


@pytest.mark.parametrize("answer, expected", [
    ('{"scores": [{"id": 1, "score": 8}, {"id": 2, "score": 3}]}', {0: 8.0, 1: 3.0}),
    ('<think>rate {"scores": [0, 0]}</think>\n```json\n{"scores": [{"id": 2, "score": 9}, '
     '{"id": 1, "score": 4}]}\n```', {0: 4.0, 1: 9.0}),
    ("Sure: {'scores': [{'id': 1, 'score': '7',}, {'id': 2, 'score': 2,},]} hope it helps", {0: 7.0, 1: 2.0}),
    ("[6, 11]", {0: 6.0, 1: 10.0}),  # by position, clipped to 0-10
    ('{"1": 5, "snippet 2": 1}', {0: 5.0, 1: 1.0}),
    ('[{"index": 2, "relevance": 7}, {"index": 1, "relevance": -3}]', {0: 0.0, 1: 7.0}),
    ('{"scores": [5, 4', {0: 5.0, 1: 4.0}),  # cut off by max_tokens: repaired
])
def test_answers_are_parsed_tolerantly(answer, expected):
    assert parse_scores(answer, 2) == expected


@pytest.mark.parametrize("answer, count", [
    ("I cannot rate these.", 2),
    ('<think>snippet 1 is {"scores": [9, 9]', 2),  # never left its thinking
    ("", 2),
    ('{"scores": [7]}', 4),  # one of four scored
    ("[1, 2, 3, 4, 5]", 4),  # more positional scores than snippets
    ('{"scores": [{"id": 9, "score": 5}, {"id": true, "score": 5}]}', 2),  # ids that name no snippet
    ('{"scores": [null, "high", NaN]}', 3),
])
def test_unusable_answers_are_malformed(answer, count):
    with pytest.raises(RerankFailed) as caught:
        parse_scores(answer, count)
    assert caught.value.reason == "malformed"


def test_strip_thinking_keeps_the_answer_only():
    assert strip_thinking("<think>a</think>x<THINK>b</THINK>y").strip() == "xy"
    assert strip_thinking("answer <think>unfinished") == "answer "


def test_blend_reorders_the_top_and_keeps_the_tail():
    hits = [_hit("a", 0.9), _hit("b", 0.8), _hit("c", 0.7), _hit("d", 0.6)]
    out = blend(hits, {0: 0.0, 1: 2.0, 2: 10.0}, weight=0.5, top_k=3)
    assert [h.id for h in out] == ["c", "b", "a", "d"]  # 0.85, 0.5, 0.45; d untouched
    c = out[0]
    assert c.score == pytest.approx(0.5 * 0.7 + 0.5 * 1.0) and c.rerank_score == 10.0
    assert c.original_score == 0.7, "the backend's score is kept"
    assert out[3] is hits[3], "past top_k: untouched"


def test_blend_with_weight_zero_keeps_the_order_and_unscored_keep_their_score():
    hits = [_hit("a", 0.9), _hit("b", 0.8), _hit("c", 0.7)]
    assert [h.id for h in blend(hits, {0: 0, 1: 10, 2: 5}, weight=0.0, top_k=20)] == ["a", "b", "c"]
    out = blend(hits, {1: 10.0}, weight=0.6, top_k=20)  # b: 0.4 * 0.8 + 0.6 = 0.92
    assert [h.id for h in out] == ["b", "a", "c"] and out[1].score == 0.9 and out[1].rerank_score is None


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30),
       st.dictionaries(st.integers(0, 29), st.floats(0, 10)), st.floats(0, 1), st.integers(1, 30))
def test_blend_is_a_permutation(scores, relevance, weight, top_k):
    hits = [_hit(f"m{i}", s) for i, s in enumerate(scores)]
    out = blend(hits, relevance, weight, top_k)
    assert sorted(h.id for h in out) == sorted(h.id for h in hits)
    assert [h.id for h in out[top_k:]] == [h.id for h in hits[top_k:]]
    head = [h.score for h in out[:top_k]]
    assert head == sorted(head, reverse=True)
