"""Hypothesis strategies for the result's models, shared by the tests of their JSON forms."""

from __future__ import annotations

from hypothesis import strategies as st

from ferret.contract import ResultItem
from ferret.stats import JobStats

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # lone surrogates: their own tests
maybe_text = st.none() | texts


def result_items(floats: st.SearchStrategy[float]) -> st.SearchStrategy[ResultItem]:
    return st.builds(ResultItem, id=texts, score=floats, original_score=floats, section=texts, subtype=maybe_text,
                     sub_query=st.integers(0, 9), sub_query_text=maybe_text, title=texts, preview=texts,
                     date=maybe_text, rerank_score=st.none() | floats)


def job_stats(floats: st.SearchStrategy[float]) -> st.SearchStrategy[JobStats]:
    return st.builds(JobStats, complexity_score=st.none() | floats, route=maybe_text,
                     sub_queries=st.none() | st.lists(texts, max_size=3),
                     stage_ms=st.none() | st.dictionaries(texts, floats, max_size=3),
                     backend_calls=st.none() | st.lists(st.tuples(texts, texts, floats), max_size=2),
                     fusion=st.none() | st.dictionaries(texts, st.integers() | floats | texts | st.none(), max_size=3),
                     cache_hit=st.none() | st.booleans(), retries=st.none() | st.integers(0, 5))
