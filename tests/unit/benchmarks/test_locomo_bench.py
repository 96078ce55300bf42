import json

import pytest

from benchmarks.retrieval import Answer, evaluate, score_compounds, score_singles
from ferret.bench.locomo import TEMPLATES, compound_queries, load, read_compound_file
from ferret.settings import PipelineSettings


@pytest.fixture
def locomo_file(tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Coco"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I started pottery classes", "blip_caption": "a vase"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "We hiked the mountain trail on Sunday"},
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"], "category": 4},
            {"question": "What class did Bob start?", "evidence": ["D1:2", "D8:6; D9:17"], "category": 1},
            {"question": "Where did Ann hike?", "evidence": ["D1:3"], "category": 2},
            {"question": "What did Bob eat?", "evidence": ["D1:9"], "category": 3},
            {"question": "Adversarial?", "evidence": ["D1:1"], "category": 5},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    return path


def test_loader_skips_and_counts(locomo_file):
    data = load(locomo_file)
    assert [m.id for m in data.memories["conv-x"]] == ["D1:1", "D1:2", "D1:3"]
    assert "[shares an image: a vase]" in data.memories["conv-x"][1].content_body
    assert data.memories["conv-x"][0].temporal_event_time == "2023-05-08T13:56:00Z"
    assert len(data.questions) == 3
    assert data.skipped == {"adversarial_question": 1, "malformed_evidence_id": 2,
                            "question_without_valid_evidence": 1}


def test_compound_queries_pair_disjoint_evidence_with_every_template(locomo_file):
    data = load(locomo_file)
    made = compound_queries(data.questions, per_conversation=3)
    assert len(made) == 3
    for query in made:
        assert not query.parts[0] & query.parts[1]
    assert {q.template for q in made} == set(TEMPLATES[:3])
    assert compound_queries(data.questions, 3) == made, "deterministic"


def test_compound_file(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"conversation": "c", "text": "a? b?", "parts": [["D1:1"], ["D1:2"]]}) + "\n")
    (query,) = read_compound_file(path)
    assert query.evidence == {"D1:1", "D1:2"}


def test_metrics():
    from ferret.bench.locomo import CompoundQuery, Question
    q = Question("c", "q", frozenset({"a", "b"}), 1)
    singles = score_singles([Answer(("a", "x", "b"), 0, 0.0)], [q])
    assert singles["recall@5"] == 1.0 and singles["all@5"] == 1.0
    compound = CompoundQuery("c", "q", (frozenset({"a"}), frozenset({"z"})), "and")
    scored = score_compounds([Answer(("a", "x"), 0, 0.0)], [compound])
    assert scored["both@5"] == 0.0 and scored["recall@5"] == 0.5


def test_evaluate_end_to_end(locomo_file):
    data = load(locomo_file)
    report = evaluate(data, compound_queries(data.questions, 3), PipelineSettings())
    assert {"single_shot", "ferret", "no_decomposition", "no_retry", "no_replacement", "no_intent_boost",
            "reference_perfect_split"} <= set(report)
    assert report["ferret"]["single"]["recall@20"] == 1.0


def test_affinity_effect_builds_links_from_earlier_questions_and_scores_the_rest(locomo_file):
    from benchmarks.affinity import affinity_effect, markdown
    from ferret.settings import CoRetrievalSettings

    data = load(locomo_file)
    report = affinity_effect(data, PipelineSettings(), CoRetrievalSettings(enabled=True), passes=2,
                             weights=(0.0, 0.5))
    assert report["earlier_questions"] + report["held_out_questions"] == len(data.questions)
    assert report["earlier_questions"] == 2 and report["held_out_questions"] == len(data.questions) - 2
    assert report["links"] > 0, "the earlier questions' results were strengthened"
    assert set(report["by_weight"]) == {"0", "0.5"}
    assert report["by_weight"]["0"]["changed_top10"] == 0
    assert "| 0.5 |" in markdown(report)


def test_a_compound_file_keeps_every_part_and_its_questions(tmp_path):
    import pytest

    path = tmp_path / "c.jsonl"
    row = {"conversation": "c", "text": "a? b? c?", "parts": [["D1:1"], ["D1:2"], ["D1:3", "D1:4"]],
           "questions": ["a?", "b?", "c?"]}
    path.write_text(json.dumps(row) + "\n")
    (query,) = read_compound_file(path)
    assert len(query.parts) == 3 and query.questions == ("a?", "b?", "c?")
    path.write_text(json.dumps({**row, "questions": ["a?"]}) + "\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:1: questions"):
        read_compound_file(path)


def test_n_part_scores():
    from ferret.bench.locomo import CompoundQuery

    three = CompoundQuery("c", "q", (frozenset({"a"}), frozenset({"b"}), frozenset({"z"})), "file")
    two = CompoundQuery("c", "q", (frozenset({"a"}), frozenset({"b"})), "file")
    scored = score_compounds([Answer(("a", "b", "x"), 0, 0.0)] * 2, [three, two])
    assert scored["both@5"] == 0.5  # every part: the two-part one only
    assert scored["by_parts"]["3"]["all@5"] == 0.0 and scored["by_parts"]["3"]["both@5"] == 1.0
    assert scored["by_parts"]["2"]["all@5"] == 1.0
