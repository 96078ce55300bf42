"""The peer lab's judging: which questions only a peer answers, of which kind, and what a Ferret row recovers
(the peers themselves need their libraries: ``ferret bench peers`` says which are missing)."""

from click.testing import CliRunner

from benchmarks import peers
from ferret.bench.locomo import Question
from ferret.cli.main import cli

QUESTIONS = [Question("c", "q0", frozenset({"e0"}), 1), Question("c", "q1", frozenset({"e1", "e2"}), 1),
             Question("c", "q2", frozenset({"e3"}), 1)]


def test_a_question_is_peer_only_for_the_evidence_a_peer_found_and_ferret_did_not():
    ferret = [["x", "e0"], ["e1", "y"], ["z"]]
    found = {"llamaindex_bm25": [["e0"], ["e2"], ["w"]], "sentence_model": [["n"], ["e1"], ["e3"]]}
    missed = peers.peer_only(QUESTIONS, ferret, found)
    assert missed == {1: {"e2"}, 2: {"e3"}}  # q0: Ferret has e0 too; q1: only e2 is new
    assert peers.kind(1, QUESTIONS[1], missed[1], found) == "words"  # the BM25 peer found it
    assert peers.kind(2, QUESTIONS[2], missed[2], found) == "meaning"  # only the sentence model did


def test_a_row_recovers_a_question_when_its_top_ten_holds_the_missed_evidence():
    missed = {1: {"e2"}, 2: {"e3"}}
    assert peers.recovered(missed, [[], ["e2"], ["a"] * 10 + ["e3"]]) == 1  # e3 at rank 11 does not count
    assert peers.recovered(missed, [[], ["e1"], ["e3"]]) == 1
    assert peers.recall_at_k(QUESTIONS, [["e0"], ["e1"], []]) == (1 + 0.5 + 0) / 3


def test_the_command_names_the_peers_packages_when_they_are_missing(monkeypatch):
    monkeypatch.setattr(peers, "peer_libraries_missing", lambda: ["llama-index-retrievers-bm25", "rank-bm25"])
    result = CliRunner().invoke(cli, ["bench", "peers", "--data", __file__])
    assert result.exit_code == 2
    assert "pip install llama-index-retrievers-bm25 rank-bm25" in result.output
