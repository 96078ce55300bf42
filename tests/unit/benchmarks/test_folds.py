import pytest

from benchmarks.folds import FoldRun, Tuned, bootstrap_interval, evaluate_folds, make_folds
from benchmarks.folds_report import markdown
from ferret.bench.locomo import CompoundQuery, Dataset, Question
from ferret.records import Memory
from ferret.settings import PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend


def test_every_conversation_is_left_out_once_and_never_trained_on_then():
    folds = make_folds(["c3", "c1", "c2", "c5", "c4"], 2)
    assert [f.left_out for f in folds] == [("c1", "c3", "c5"), ("c2", "c4")]
    assert all(not set(f.left_out) & set(f.training) for f in folds)
    with pytest.raises(ValueError, match="--folds"):
        make_folds(["c1", "c2"], 3)


def test_the_bootstrap_interval_holds_the_mean_and_is_zero_for_no_difference():
    low, high = bootstrap_interval([0.0, 1.0] * 50)
    assert low < 0.5 < high and high - low < 0.3
    assert bootstrap_interval([0.0] * 20) == (0.0, 0.0)


def _dataset() -> Dataset:
    """Two conversations: in "a" the named speaker's own line answers, in "b" the other speaker's does."""
    memories, questions = {}, []
    for name, answer_by in (("a", "Ann"), ("b", "Bob")):
        other = "Bob" if answer_by == "Ann" else "Ann"
        memories[name] = [Memory(id=f"{name}{i}", type="event", content_body=text) for i, text in enumerate([
            f"{answer_by}: the pottery was fun", f"{other}: pottery class pottery class again",
            f"{other}: Ann and Bob pottery", "Cy: hello there"])]
        questions.append(Question(name, "What class did Ann take in pottery?", frozenset({f"{name}0"}), 4))
    return Dataset(memories, questions)


def test_a_tuned_system_takes_the_candidate_its_training_conversations_chose():
    dataset = _dataset()
    base = PipelineSettings(max_results=1, min_results=1, good_score=None)
    run = FoldRun(dataset, make_folds(["a", "b"], 2),
                  {name: InMemoryBackend(m) for name, m in dataset.memories.items()})
    tuned = Tuned({"off": base.model_copy(update={"subject_boost": 1.0}),
                   "on": base.model_copy(update={"subject_boost": 3.0})})
    picks = run.chosen(tuned)
    # fold 0 leaves "a" out and trains on "b", where the boost is wrong, and the other way round
    assert picks == {0: "off", 1: "on"}


def test_the_report_has_every_section_with_intervals():
    dataset = _dataset()
    compound = {"mine": [CompoundQuery("a", "What class did Ann take? Who said hello?",
                                       (frozenset({"a0"}), frozenset({"a3"})), "file",
                                       ("What class did Ann take?", "Who said hello?"))]}
    report = evaluate_folds(dataset, 2, PipelineSettings(), compound, {"before": compound})
    assert set(report["single"]) >= {"single_shot_stripped", "ferret", "ferret_tuned_on_folds", "no_subject_boost"}
    assert report["single"]["single_shot_stripped"]["recall@10"]["interval"] == (0.0, 0.0)
    assert len(report["per_question"]["recall@10"]["ferret"]) == 2
    assert report["compound"]["shipped"]["mine"]["n"] == 1 and report["false_split"]["of"] == 2
    assert "untouched set written before" in markdown(report)


def _locomo_file(tmp_path, conversations):
    import json
    samples = []
    for name in conversations:
        turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Coco"},
                 {"speaker": "Bob", "dia_id": "D1:2", "text": "I started pottery classes"}]
        samples.append({"sample_id": name, "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                                            "session_1_date_time": "1:56 pm on 8 May, 2023",
                                                            "session_1": turns},
                        "qa": [{"question": "What is the name of Ann's puppy?", "evidence": ["D1:1"], "category": 4},
                               {"question": "What class did Bob start?", "evidence": ["D1:2"], "category": 1}]})
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(samples))
    return path


def test_the_command_writes_the_folds_report_and_names_a_bad_fold_count(tmp_path):
    from click.testing import CliRunner

    from ferret.cli.main import cli
    data = _locomo_file(tmp_path, ["conv-a", "conv-b"])
    done = CliRunner().invoke(cli, ["bench", "retrieval", "--data", str(data), "--folds", "2",
                                    "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert "left out" in done.output and (tmp_path / "out" / "retrieval-folds.json").exists()
    refused = CliRunner().invoke(cli, ["bench", "retrieval", "--data", str(data), "--folds", "3"])
    assert refused.exit_code == 2 and "--folds: between 2 and the number of conversations (2), not 3" in refused.output
