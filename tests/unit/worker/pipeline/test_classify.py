import time

import pytest

from ferret.records import Section
from ferret.worker.pipeline.classify import QueryType, classify


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Why did the SOL trade fail?", {"D1"}),
        ("trades I did not take", {"D2"}),
        ("what did I buy yesterday", {"D3"}),
        ("What's BTC at? Did SOL close?", {"D4"}),
        ("What's my BTC thesis and how did my last SOL trade go?", {"D4", "D3"}),
        ("Check BTC, also look at ETH?", {"D4"}),
        ("BTC and SOL analysis", {"D4"}),
        ("and what about it?", {"D5"}),
        ("tell me everything about funding", {"D6"}),
        ("BTC support levels", set()),
    ],
)
def test_disqualifiers_reports_every_category_that_matches(query, expected):
    assert set(classify(query).disqualifiers) == expected


def test_several_disqualifiers_at_once():
    result = classify("Why did I not take the ETH trade yesterday?")
    assert {"D1", "D2", "D3"} <= set(result.disqualifiers)


@pytest.mark.parametrize(
    ("query", "qtype"),
    [
        ("compare BTC versus ETH funding", QueryType.COMPARATIVE),
        ("relationship between funding and price", QueryType.RELATIONAL),
        ("how to set a stop", QueryType.PROCEDURAL),
        ("give me an overview of my trades", QueryType.EXPLORATORY),
        ("why do squeezes reverse", QueryType.ANALYTICAL),
        ("what is my BTC entry", QueryType.FACTUAL),
        ("Compare les avantages du processus X par rapport a Y", QueryType.COMPARATIVE),
        ("¿Cuál es la relación entre BTC y ETH?", QueryType.RELATIONAL),
        ("Wie kann ich einen Stop setzen, Schritte?", QueryType.PROCEDURAL),
        ("pourquoi le BTC monte", QueryType.ANALYTICAL),
        ("zzz qqq", QueryType.UNKNOWN),
    ],
)
def test_query_type_in_four_languages(query, qtype):
    assert classify(query).query_type is qtype


def test_confidence_is_higher_for_pattern_matches_than_fallbacks():
    assert classify("compare BTC and ETH").confidence > classify("what is BTC").confidence
    assert classify("what is BTC").confidence > classify("zzz qqq").confidence


def test_entity_and_attribute():
    result = classify("BTC and SOL analysis")
    assert result.entities == ("BTC", "SOL")
    assert result.entity == "BTC"
    assert result.attribute == "analysis"


def test_intents_are_multi():
    result = classify("what signals are firing and what have I learned about them?")
    assert set(result.intents) == {Section.SIGNALS, Section.KNOWLEDGE}


def test_intent_keywords_match_whole_words_only():
    assert classify("deliver the ruler").intents == ()


def test_classify_is_fast():
    # Not a timing assertion on the whole suite: a gross regression guard only
    # (the benchmark script measures the real figure).
    start = time.perf_counter()
    for _ in range(200):
        classify("What's my BTC thesis and how did my last SOL trade go?")
    assert (time.perf_counter() - start) / 200 < 0.01
