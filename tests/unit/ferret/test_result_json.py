"""result_json writes what pydantic's model_dump_json writes, for any result."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from ferret.contract import ResultItem, RetrievalResult, Timestamps
from ferret.result_json import result_json
from ferret.stats import JobStats
from tests.strategies import job_stats, maybe_text, result_items, texts

floats = st.floats(allow_nan=True, allow_infinity=True)
items = result_items(floats)
stats = job_stats(floats)
results = st.builds(
    RetrievalResult, job_id=texts, request_id=maybe_text, namespace=texts, queue=texts,
    status=st.sampled_from(["ok", "partial", "expired", "failed"]), error=maybe_text,
    results=st.lists(items, max_size=4), context=texts, stats=stats,
    timestamps=st.builds(Timestamps, enqueued_at=floats, deadline_at=floats, started_at=st.none() | floats,
                         finished_at=st.none() | floats),
    trace_id=maybe_text, worker=maybe_text)


@given(results)
def test_the_same_bytes_as_pydantic(result):
    assert result_json(result) == result.model_dump_json().encode()


def test_the_same_bytes_for_a_full_result():
    item = ResultItem(id="m1", score=1.3, original_score=1.0, section="EPISODIC", subtype=None, sub_query=1,
                      sub_query_text="what class did I book", title="Flights booked to Italy",
                      preview="Booked the flight to Rome for 14 March, window seat \u2028 \x1f é \"quoted\" \\",
                      date="2026-03-14T07:40:00Z", rerank_score=7.5)
    result = RetrievalResult(job_id="fr-r-1", request_id="r1", namespace="home", queue="prefetch", status="ok",
                             results=[item] * 3, context="## Flights\n- Rome, 14 March", worker="w1",
                             stats=JobStats(route="MODERATE", stage_ms={"search": 1.97}, was_decomposed=True,
                                            backend_calls=[("search", "ok", 0.001)]),
                             timestamps=Timestamps(enqueued_at=1.5, deadline_at=6.5, started_at=2.0,
                                                   finished_at=2.25))
    assert result_json(result) == result.model_dump_json().encode()


def test_what_orjson_refuses_fails_as_pydantic_fails():
    stamps = Timestamps(enqueued_at=1.0, deadline_at=2.0)
    lone = RetrievalResult(job_id="j", namespace="n", queue="q", status="ok", context="a\ud800b", timestamps=stamps)
    with pytest.raises(PydanticSerializationError):
        result_json(lone)
    huge = RetrievalResult(job_id="j", namespace="n", queue="q", status="ok", timestamps=stamps,
                           stats=JobStats(fusion={"count": 2**70}))
    assert result_json(huge) == huge.model_dump_json().encode()
