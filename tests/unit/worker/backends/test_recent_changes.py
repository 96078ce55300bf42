"""Staged writes (``ferret.worker.backends.recent_changes``): searchable at once, scored as
tantivy will score them once folded, with stale committed copies hidden."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ferret.records import Filters, Memory, TimeRange
from ferret.worker.backends.recent_changes import FIELD_NORMS, stored_length
from ferret.worker.backends.tantivy_index import MemoryIndex, _explained, _term
from ferret.worker.backends.tokens import tokenize

TOPICS = ["pottery class", "camping trip", "violin lessons", "marathon training", "adoption agency", "painting a lake",
          "support group", "charity race", "book club", "family dinner"]


def _corpus(count: int) -> list[Memory]:
    return [Memory(id=f"m{i}", type="event" if i % 3 else "fact",
                   content_body=f"Caroline talked about the {TOPICS[i % len(TOPICS)]} on day {i}"
                                + " and more" * (i % 7))
            for i in range(count)]


NEW = Memory(id="new", type="event", content_body="Melanie signed up for the pottery class and a charity race in May")


def _ranked(index: MemoryIndex, query: str) -> list[tuple[str, float]]:
    """Every match, ranked (no cut: equal scores at a cut could go either way)."""
    return index.search(query, 1000)


@pytest.mark.parametrize("query", ["pottery class", "charity race in May", "Melanie pottery", "camping trip day 4",
                                   "Melanie"])
def test_a_staged_memory_ranks_and_scores_as_it_will_once_committed(query):
    staged, committed = MemoryIndex(), MemoryIndex()
    for index in (staged, committed):
        index.apply(upserts=_corpus(200), fresh=True)
    staged.stage(upserts=[NEW])
    committed.apply(upserts=[NEW])
    assert len(staged.recent) == 1 and len(committed.recent) == 0
    before, after = _ranked(staged, query), _ranked(committed, query)
    assert [memory_id for memory_id, _ in before] == [memory_id for memory_id, _ in after]
    # The staged memory scores exactly as it will. The index's hits get the idf their terms will
    # have where the staged memory shares them; what is left (one more document in N and in the
    # average length) moves them by 0.1% at most here, and a term in every document's idf by 0.005
    # of the scale.
    touched = "new" in dict(after)
    scores = dict(after)
    if touched:
        assert dict(before)["new"] == pytest.approx(scores["new"], rel=1e-5)
    for (_, mine), (_, theirs) in zip(before, after, strict=True):
        assert mine == pytest.approx(theirs, rel=1e-3, abs=1e-6 if touched else 5e-3)
    staged.fold()
    assert len(staged.recent) == 0 and _ranked(staged, query) == after


def test_deletes_and_rewrites_hide_the_committed_copy_at_once():
    index = MemoryIndex()
    index.apply(upserts=_corpus(50), fresh=True)
    assert "m0" in dict(index.search("pottery class day 0", 5))
    index.stage(deletes=["m0"], upserts=[Memory(id="m10", content_body="Caroline went bowling instead")])
    found = dict(index.search("pottery class day 0 day 10", 50))
    assert "m0" not in found and "m10" not in found  # m10's old text no longer matches
    assert "m10" in dict(index.search("bowling", 5))
    index.stage(clear=True, upserts=[Memory(id="only", content_body="the pottery class moved")])
    assert [memory_id for memory_id, _ in index.search("pottery class", 10)] == ["only"]
    index.fold()
    assert [memory_id for memory_id, _ in index.search("pottery class", 10)] == ["only"]


def test_filters_apply_to_staged_memories_as_to_the_index():
    may = datetime(2023, 5, 1, tzinfo=UTC)
    staged = Memory(id="s", type="plan", subtype="trip", state_lifecycle="active", cluster_ids=("travel",),
                    temporal_event_time="2023-05-03T10:00:00Z", content_body="the pottery class trip")
    index, reference = MemoryIndex(), MemoryIndex()
    for each in (index, reference):
        each.apply(upserts=_corpus(20), fresh=True)
    index.stage(upserts=[staged])
    reference.apply(upserts=[staged])
    for filters in (Filters(type="plan"), Filters(type="event"), Filters(subtype="trip"), Filters(lifecycle="ACTIVE"),
                    Filters(lifecycle="archived"), Filters(cluster_ids=("travel", "x")), Filters(cluster_ids=("x",)),
                    Filters(time_range=TimeRange(start=may, type="event")),
                    Filters(time_range=TimeRange(end=may, type="event")),
                    Filters(time_range=TimeRange(start=may, type="ingestion"))):
        assert ("s" in dict(index.search("pottery class trip", 30, filters))) == \
               ("s" in dict(reference.search("pottery class trip", 30, filters))), filters


def test_the_field_norm_table_is_tantivys():
    """Document lengths as tantivy stores them, read from its own explanation of a score."""
    assert len(FIELD_NORMS) == 256 and FIELD_NORMS[:41] == list(range(41))
    index = MemoryIndex()
    lengths = [1, 7, 40, 41, 43, 57, 61, 100, 153, 300, 999, 5000]
    index.apply(upserts=[Memory(id=str(n), content_body=" ".join(["zebra"] + [f"w{k}" for k in range(n - 1)]))
                         for n in lengths], fresh=True)
    token = tokenize("zebra")[0]
    term = _term("tokens", token)
    searcher = index._searcher
    for _score, address in searcher.search(term, len(lengths)).hits:
        length = int(searcher.doc(address)["id"][0])
        stored = _explained(term.explain(searcher, address).to_json()).terms[token][1]
        assert stored == stored_length(len(tokenize(" ".join(["zebra"] + [f"w{k}" for k in range(length - 1)]))))


def test_postings_follow_rewrites_deletes_and_clears():
    """A search reads the postings of its terms: after rewrites, deletes and a clear they must hold
    exactly the staged memories' terms, as counting every staged memory would."""
    from ferret.worker.backends.recent_changes import RecentChanges

    recent = RecentChanges()

    def check():
        walked: dict[str, dict[str, int]] = {}
        for doc in recent.docs.values():
            for term, times in doc.terms.items():
                walked.setdefault(term, {})[doc.id] = times
        assert recent.postings == walked
        assert recent.total_length == sum(doc.length for doc in recent.docs.values())
        assert all(recent.doc_freq(t) == sum(t in d.terms for d in recent.docs.values()) for t in walked)

    recent.upsert([Memory(id="a", content_body="pottery class pottery"), Memory(id="b", content_body="camping trip")])
    check()
    recent.upsert([Memory(id="a", content_body="violin lessons")])  # rewritten: pottery is gone
    check()
    pottery, camping = tokenize("pottery")[0], tokenize("camping")[0]
    assert pottery not in recent.postings and recent.doc_freq(camping) == 1
    recent.delete(["b", "never-staged"])
    check()
    recent.clear()
    check()
    assert recent.postings == {} and recent.total_length == 0
