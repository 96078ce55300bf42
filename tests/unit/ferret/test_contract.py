import pytest

from ferret.contract import parse_request
from ferret.errors import InvalidRequest
from ferret.settings import LimitSettings

LIMITS = LimitSettings()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "a\x00b"}, "query"),
        ({"query": "BTC \udc80"}, "query"),  # a lone surrogate, as a JSON escape can carry
        ('{"query": "BTC \\udc80"}', "request"),  # JSON text: pydantic's parser refuses it as invalid JSON
        ({"query": "q", "filters": {"subtype": "\ud800"}}, "filters.subtype"),
        ({"query": "q", "filters": {"cluster_ids": ["c1", "\udfff"]}}, "filters.cluster_ids"),
        ({"query": "x" * 10_000_000}, "query"),
        ({}, "query"),
        ({"query": 5}, "query"),
        ({"query": "q", "filters": {"colour": "red"}}, "filters.colour"),
        ({"query": "q", "filters": {"time_range": {"start": "not a date"}}}, "filters.time_range.start"),
        ({"query": "q", "namespace": "a:b*"}, "namespace"),
        ({"query": "q", "request_id": "x y"}, "request_id"),
        ({"query": "q", "queue": "urgent"}, "queue"),
        ({"query": "q", "deadline_seconds": -1}, "deadline_seconds"),
        ({"query": "q", "deadline_seconds": 1e12}, "deadline_seconds"),
        ({"query": "q", "options": {"max_results": 100000}}, "options.max_results"),
        ({"query": "q", "surprise": 1}, "surprise"),
    ],
)
def test_bad_input_names_the_field(payload, field):
    with pytest.raises(InvalidRequest) as info:
        parse_request(payload, LIMITS)
    assert info.value.field == field


def test_not_an_object():
    with pytest.raises(InvalidRequest, match="request"):
        parse_request([1, 2], LIMITS)


def test_valid_request_defaults():
    request = parse_request({"query": "BTC thesis"}, LIMITS)
    assert (request.namespace, request.queue, request.deadline_seconds) == ("default", "prefetch", None)


def test_json_text_accepted():
    assert parse_request('{"query": "BTC", "queue": "batch"}', LIMITS).queue == "batch"


def test_history_takes_strings_and_turns():
    request = parse_request({"query": "and the other one?", "history": [
        "Compare BTC and SOL", {"role": "assistant", "content": "BTC is up, SOL flat."}]}, LimitSettings())
    assert [(t.role, t.content) for t in request.history] == [("user", "Compare BTC and SOL"),
                                                              ("assistant", "BTC is up, SOL flat.")]
    assert parse_request({"query": "x"}, LimitSettings()).history == ()


@pytest.mark.parametrize(("history", "field"), [
    ("Compare BTC", "history"), ([{"role": "system", "content": "x"}], "history.0.role"),
    (["ok", {"content": "a\x00b"}], "history.1.content"), ([{"text": "x"}], "history.0.content"),
    (["x"] * 11, "history"), (["ok", "y" * 4001], "history.1.content"),
])
def test_bad_history_names_the_field(history, field):
    with pytest.raises(InvalidRequest) as raised:
        parse_request({"query": "and the other one?", "history": history}, LimitSettings())
    assert raised.value.field == field, raised.value
