"""A part that found nothing gets one more try before the merge, and the stats say which parts came back empty."""

from ferret.records import Filters, Memory
from ferret.settings import FusionSettings, PipelineSettings
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.backends.tantivy_index import MemoryIndex
from ferret.worker.backends.word_family import word_family_search
from ferret.worker.pipeline.orchestrator import run_pipeline
from tests.unit.worker.pipeline.test_fusion import ConceptEmbedder

TRAVEL = [
    Memory(id="flights", type="event", content_title="Flights booked",
           content_body="Lisbon to Rome on 14 March, seats 3A and 3C"),
    Memory(id="hotel", type="event", content_title="Hotel in Rome", content_body="Hotel Artemide, three nights"),
    Memory(id="seat", type="preference", content_title="Seat class", content_body="I book business class"),
    Memory(id="risotto", type="recipe", content_title="Risotto", content_body="arborio rice, white wine, stock"),
]
QUESTION = "When do I fly and what class did I book?"


def test_a_part_whose_words_are_not_in_any_memory_is_answered_by_their_word_family():
    result = run_pipeline(QUESTION, InMemoryBackend(TRAVEL), PipelineSettings())
    assert result.stats.plan.sub_queries == ["When do I fly", "what class did I book"]
    assert result.stats.search.empty_parts == [0] and result.stats.search.empty_parts_filled == 1
    by_part = {h.id: h.sub_query for h in result.hits}
    assert by_part["flights"] == 0 and by_part["seat"] == 1  # both parts answered, each by its own memory
    assert "risotto" not in by_part


def test_parts_that_found_something_leave_no_empty_parts_in_the_stats():
    result = run_pipeline("What class did I book and which hotel in Rome?", InMemoryBackend(TRAVEL),
                          PipelineSettings())
    assert result.stats.plan.was_decomposed and result.stats.search.empty_parts is None
    assert result.stats.search.empty_parts_filled is None


def test_a_part_with_no_word_family_stays_empty_and_says_so():
    result = run_pipeline("When do I fly and what is the zzyzx?", InMemoryBackend(TRAVEL), PipelineSettings())
    assert result.stats.search.empty_parts == [0, 1] and result.stats.search.empty_parts_filled == 1
    assert {h.sub_query for h in result.hits} == {0}


def test_the_semantic_retriever_answers_an_empty_part_first_when_the_backend_has_it():
    memories = [Memory(id="auto", content_body="Sold the old automobile last spring"),
                Memory(id="pup", content_body="Adopted a puppy")]
    backend = InMemoryBackend(memories, embedder=ConceptEmbedder())
    settings = PipelineSettings(fusion=FusionSettings(semantic_on_parts=False))
    result = run_pipeline("When did I sell my car and when did I adopt the puppy?", backend, settings)
    assert result.stats.plan.was_decomposed and result.stats.search.empty_parts == [0]
    assert result.stats.search.empty_parts_filled == 1
    assert {h.id: h.sub_query for h in result.hits}["auto"] == 0


def test_staged_and_committed_memories_both_lend_words_and_the_family_is_scored_by_bm25():
    index = MemoryIndex()
    index.apply(TRAVEL[:2])
    staged = Memory(id="later", content_title="Flight moved", content_body="the flight now leaves at 9")
    index.stage([staged])
    memories = {m.id: m for m in (*TRAVEL, staged)}
    pairs = word_family_search(index, lambda ids: {i: memories[i] for i in ids if i in memories}, "fly", 10,
                               Filters())
    assert {memory_id for memory_id, _ in pairs} == {"flights", "later"}
    assert all(0 < score <= 1 for _, score in pairs)
    assert word_family_search(index, lambda ids: {i: memories[i] for i in ids}, "fly", 10,
                              Filters(type="preference")) == []  # filters hold
    assert word_family_search(index, lambda ids: {i: memories[i] for i in ids}, "qq", 10, Filters()) == []
