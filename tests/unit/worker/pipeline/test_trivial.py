import pytest

from ferret.settings import PipelineSettings
from ferret.worker.pipeline.trivial import prepare

WORDS = PipelineSettings().trivial_messages


@pytest.mark.parametrize(("message", "skip"), [
    ("ok", "trivial"), ("OK!", "trivial"), ("Thanks.", "trivial"), ("thank you!!", "trivial"),
    ("merci", "trivial"), ("Danke!", "trivial"), ("[2026-11-23 14:05] ok", "trivial"),
    ("2026-11-23T14:05:22Z", "empty"), ("12:30", "empty"), ("...", "empty"), ("[14:05] ?!", "empty"),
])
def test_messages_with_nothing_to_search(message, skip):
    assert prepare(message, WORDS).skip == skip


@pytest.mark.parametrize(("message", "query"), [
    ("14:05 - what is my BTC thesis?", "what is my BTC thesis?"),
    ("[14:05:22] What did I learn about stops?", "What did I learn about stops?"),
    ("11/23/2026, 2:05 PM: BTC thesis", "BTC thesis"),
    ("2026-11-23 09:00 UTC | funding squeeze playbook", "funding squeeze playbook"),
    ("What happened at 14:05?", "What happened at 14:05?"),  # a time inside the question stays
    ("2024 was a good year for BTC", "2024 was a good year for BTC"),  # a year is not a timestamp
    ("ok so what is my BTC thesis", "ok so what is my BTC thesis"),  # a trivial word at the start is not all
])
def test_a_leading_timestamp_is_stripped_and_the_rest_searched(message, query):
    prepared = prepare(message, WORDS)
    assert prepared.skip is None and prepared.query == query


def test_stripping_can_be_switched_off():
    assert prepare("14:05 - BTC thesis", WORDS, strip_timestamps=False).query == "14:05 - BTC thesis"
