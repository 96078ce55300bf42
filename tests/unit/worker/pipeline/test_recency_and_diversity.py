"""Recency and diversity, the two options (off by default): a newer memory that supersedes an older one wins
with recency on, and near-repeats step down the list with diversity on; neither changes a thing when off."""

from dataclasses import replace

from ferret.records import Hit, Memory
from ferret.settings import PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.pipeline.diversity import diversify
from ferret.worker.pipeline.orchestrator import run_pipeline
from ferret.worker.pipeline.recency import apply_recency, memory_time, newest_of

# An agent's memories over a year: where the user lives, written twice; the newer one supersedes the older.
MOVES = [
    Memory(id="paris", type="fact", content_body="The user lives in Paris",
           temporal_event_time="2025-01-10T09:00:00Z"),
    Memory(id="berlin", type="fact", content_body="An update from February: the user moved out of Paris last month "
                                                  "and now lives in a small flat in Berlin, close to the office",
           temporal_event_time="2026-02-01T09:00:00Z"),
    Memory(id="risotto", type="recipe", content_body="Risotto: arborio rice, white wine, stock"),
]
QUESTION = "where does the user live?"


def _hit(memory_id: str, score: float, when: str | None = None, body: str = "x") -> Hit:
    return Hit.of(Memory(id=memory_id, content_body=body, temporal_event_time=when), score)


def test_without_recency_the_older_memory_with_more_matching_words_ranks_first():
    result = run_pipeline(QUESTION, InMemoryBackend(MOVES), PipelineSettings())
    ids = [h.id for h in result.hits]
    assert ids.index("paris") < ids.index("berlin")


def test_with_recency_the_newer_memory_that_supersedes_it_ranks_first():
    settings = PipelineSettings(recency_half_life_days=90)
    result = run_pipeline(QUESTION, InMemoryBackend(MOVES), settings)
    ids = [h.id for h in result.hits]
    assert ids[0] == "berlin" and "paris" in ids  # the older one is still there, lower
    by_id = {h.id: h for h in result.hits}
    assert by_id["paris"].score < by_id["paris"].original_score  # decayed; the original score is kept


def test_a_requests_own_recency_replaces_the_settings():
    result = run_pipeline(QUESTION, InMemoryBackend(MOVES), PipelineSettings(), recency_half_life_days=90)
    assert result.hits[0].id == "berlin"


def test_the_decay_halves_a_score_per_half_life_behind_the_newest_candidate():
    hits = [_hit("new", 1.0, "2026-03-01T00:00:00Z"), _hit("old", 1.0, "2026-01-30T00:00:00Z"),
            _hit("timeless", 1.0), _hit("garbled", 1.0, "the day after tomorrow")]
    newest = newest_of(hits)
    assert newest == memory_time(hits[0].memory)
    decayed = {h.id: round(h.score, 6) for h in apply_recency(hits, 30, newest)}
    assert decayed == {"new": 1.0, "old": 0.5, "timeless": 1.0, "garbled": 1.0}


def test_diversity_moves_a_near_repeat_below_a_different_hit():
    hits = (_hit("a", 1.0, body="flight to Rome on 14 March seat 3A"),
            _hit("a2", 0.95, body="flight to Rome on 14 March seat 3A window"),
            _hit("b", 0.8, body="hotel Artemide three nights"),
            _hit("c", 0.5, body="risotto arborio rice"))
    assert [h.id for h in diversify(hits, 0.5)] == ["a", "b", "c", "a2"]
    assert [h.id for h in diversify(hits, 1.0)] == ["a", "a2", "b", "c"]  # all weight on relevance: unchanged
    assert sorted(h.id for h in diversify(hits, 0.0)) == ["a", "a2", "b", "c"]  # the same members, reordered


def test_diversity_through_the_pipeline_keeps_the_members_and_changes_their_order():
    memories = [Memory(id=f"rome{i}", content_body=f"Flight to Rome on 14 March, seat 3A, booking {i}")
                for i in range(4)] + [Memory(id="hotel", content_body="The hotel near Rome's station, three nights "
                                                                      "booked for the trip, breakfast included")]
    plain = run_pipeline("flight to Rome", InMemoryBackend(memories), PipelineSettings())
    varied = run_pipeline("flight to Rome", InMemoryBackend(memories), PipelineSettings(diversity=0.3))
    assert {h.id for h in plain.hits} == {h.id for h in varied.hits}
    assert [h.id for h in plain.hits].index("hotel") > [h.id for h in varied.hits].index("hotel")


def test_a_decayed_hit_keeps_its_other_fields():
    hit = replace(_hit("old", 0.8, "2025-01-01T00:00:00Z"), sub_query=2, boosted=True)
    (decayed,) = apply_recency([hit], 365, memory_time(_hit("n", 1, "2026-01-01T00:00:00Z").memory))
    assert decayed.sub_query == 2 and decayed.boosted and decayed.original_score == 0.8
    assert abs(decayed.score - 0.4) < 0.01
