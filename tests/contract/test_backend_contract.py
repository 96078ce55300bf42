"""One contract, every backend: in-memory, local (real Redis), nous (fake server)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from ferret.records import Filters, Memory, TimeRange
from ferret.settings import NousSettings
from ferret.worker.backends.local import LocalBackends, MemoryStore
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.backends.nous import NousBackend
from ferret.worker.fakes.nous_server import FakeNous

pytestmark = pytest.mark.contract

CORPUS = [
    Memory(id="a", type="concept", subtype="custom:thesis", content_title="BTC thesis",
           content_body="bitcoin halving supply shock", state_lifecycle="ACTIVE",
           temporal_event_time="2026-01-10T00:00:00Z", cluster_ids=("c1",)),
    Memory(id="b", type="event", subtype="custom:trade_close", content_title="SOL trade closed",
           content_body="closed the SOL long at a loss", state_lifecycle="ARCHIVED",
           temporal_event_time="2026-02-05T00:00:00Z", cluster_ids=("c2",)),
    Memory(id="c", type="concept", subtype="custom:lesson", content_title="Funding lesson",
           content_body="bitcoin funding squeezes reverse", state_lifecycle="ACTIVE",
           temporal_event_time="2026-03-01T00:00:00Z", cluster_ids=("c1", "c3")),
] + [
    Memory(id=f"filler{i}", content_title=f"note {i}", content_body=f"bitcoin filler text number {i}")
    for i in range(40)
]


@pytest.fixture(params=["memory", "local", "nous"])
def backend(request: pytest.FixtureRequest) -> Iterator[object]:
    if request.param == "memory":
        yield InMemoryBackend(CORPUS)
    elif request.param == "local":
        client = request.getfixturevalue("redis_client")
        MemoryStore(client, "contract").upsert(CORPUS)
        yield LocalBackends(client).for_namespace("contract")
    else:
        fake = FakeNous(CORPUS)
        nous = NousBackend(NousSettings(base_url=fake.base_url))
        nous.fake = fake  # type: ignore[attr-defined]
        yield nous
        nous.close()
        fake.close()


NONE = Filters()


def test_hits_are_sorted_scored_in_unit_interval_and_limited(backend):
    hits = backend.search("bitcoin", 5, NONE)
    assert 0 < len(hits) <= 5
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_scores_are_not_max_normalised(backend):
    strong = backend.search("bitcoin halving supply shock", 5, NONE)
    weak = backend.search("bitcoin zebra unicorn pancake", 5, NONE)
    assert strong[0].id == "a"
    assert weak and weak[0].score < 0.5 < strong[0].score


def test_no_match_is_empty(backend):
    assert backend.search("xylophone", 5, NONE) == []


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(type="event"), {"b"}),
        (Filters(subtype="custom:lesson"), {"c"}),
        (Filters(lifecycle="ARCHIVED"), {"b"}),
        (Filters(cluster_ids=("c1",)), {"a", "c"}),
        (Filters(time_range=TimeRange(start=datetime(2026, 2, 1, tzinfo=UTC),
                                      end=datetime(2026, 2, 28, tzinfo=UTC), type="event")), {"b"}),
        # The real Nous server ignores a one-sided range and matches lifecycle case-sensitively:
        # the same filter must still mean the same on every backend.
        (Filters(time_range=TimeRange(start=datetime(2026, 2, 1, tzinfo=UTC), type="event")), {"b", "c"}),
        (Filters(time_range=TimeRange(end=datetime(2026, 2, 1, tzinfo=UTC), type="event")), {"a"}),
        (Filters(time_range=TimeRange(start=datetime(2026, 2, 20, tzinfo=UTC))), {"c"}),
        (Filters(lifecycle="archived"), {"b"}),
        (Filters(lifecycle="Active", cluster_ids=("c3",)), {"c"}),
        (Filters(type="concept", time_range=TimeRange(end=datetime(2026, 2, 1, tzinfo=UTC))), {"a"}),
        (Filters(lifecycle="DORMANT"), set()),
    ],
)
def test_filters(backend, filters, expected):
    hits = backend.search("bitcoin SOL funding thesis lesson trade", 25, filters)
    assert {h.id for h in hits} == expected


def test_one_sided_range_bounds_memories_without_times_out(backend):
    # A memory with no time at all is outside every range, open-ended or not.
    hits = backend.search("bitcoin filler", 25, Filters(time_range=TimeRange(start=datetime(2000, 1, 1, tzinfo=UTC))))
    assert not any(h.id.startswith("filler") for h in hits)


def test_node_fields_round_trip(backend):
    hit = backend.search("funding squeezes", 1, NONE)[0]
    expected = CORPUS[2]
    if isinstance(backend, NousBackend):  # a Nous hit has no clusters, and the lifecycle decay computes
        expected = expected.model_copy(update={"cluster_ids": (), "state_lifecycle": "ACTIVE"})
    # Nous adds the node's memory_section (its own view of the section); every other field round-trips.
    assert hit.memory.model_copy(update={"memory_section": CORPUS[2].memory_section}) == expected
    assert hit.original_score == hit.score


def test_the_word_family_finds_words_that_begin_with_the_query_s(backend):
    """local and memory widen an empty search ("rever" begins "reverse"); Nous searches on its own terms."""
    from ferret.worker.backends.base import widens

    assert backend.search("rever", 5, NONE) == [] or backend.name == "nous"
    if backend.name == "nous":
        assert not widens(backend)
        return
    assert widens(backend)
    hits = backend.widened("rever", 5, NONE)
    assert [h.id for h in hits] == ["c"] and 0 < hits[0].score <= 1
    assert backend.widened("rever", 5, Filters(subtype="custom:thesis")) == []
