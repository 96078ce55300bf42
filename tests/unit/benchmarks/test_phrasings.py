from benchmarks.phrasings import PHRASINGS, evaluate_sets, markdown, phrasing_sets, write_sets
from ferret.bench.locomo import Question, read_compound_file
from ferret.records import Memory
from ferret.settings import PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend

NAMES = ["Ann", "Bob", "Cleo"]
QUESTIONS = [Question("c", f"What did {NAMES[i % 3]} do on day {i}?", frozenset({f"D{i}"}), 1) for i in range(12)]
MEMORIES = [Memory(id=f"D{i}", content_body=f"{NAMES[i % 3]}: on day {i} I did thing{i}") for i in range(12)]


def test_every_phrasing_makes_rows_of_its_parts_with_disjoint_evidence_and_their_questions():
    sets = phrasing_sets(QUESTIONS, per_conversation=3)
    assert set(sets) == {p.name for p in PHRASINGS}
    for phrasing in PHRASINGS:
        rows = sets[phrasing.name]
        assert rows, phrasing.name
        for row in rows:
            assert len(row.parts) == phrasing.parts and row.questions and len(row.questions) == phrasing.parts
            assert all(not (a & b) for i, a in enumerate(row.parts) for b in row.parts[i + 1:])


def test_the_phrasings_read_as_people_write_them():
    sets = phrasing_sets(QUESTIONS, per_conversation=1)
    text = {name: rows[0].text for name, rows in sets.items()}
    assert text["bullets"].startswith("- What did") and "\n- what did" not in text["bullets"]
    assert text["three_numbered"].startswith("1. ") and "\n3. " in text["three_numbered"]
    assert ", and what did" in text["four_listed"] and text["four_listed"].count(", ") >= 3
    assert " ? Et aussi, what did" in text["fr_et_aussi"] and "¿" in text["es_y_tambien"]
    assert "? Und außerdem: what did" in text["de_und_ausserdem"]
    person = sets["same_person"][0]
    name = person.questions[0].split()[2]
    assert person.text.count(name) == 1 and (" he " in person.text or " she " in person.text)


def test_sets_are_scored_against_the_perfect_split_and_written_as_compound_files(tmp_path):
    sets = phrasing_sets(QUESTIONS, per_conversation=2)
    report = evaluate_sets({"c": InMemoryBackend(MEMORIES)}, sets, PipelineSettings())
    assert report["bullets"]["perfect_split"]["both@10"] == 1.0
    assert report["bullets"]["ferret"]["both@10"] == 1.0, "each line is a question: split and both found"
    assert "sets where Ferret's all@10 is below the perfect split's" in markdown(report)
    write_sets(sets, tmp_path)
    again = read_compound_file(tmp_path / "four_bullets.jsonl")
    assert [q.text for q in again] == [q.text for q in sets["four_bullets"]]
    assert all(len(q.parts) == 4 and q.questions for q in again)
