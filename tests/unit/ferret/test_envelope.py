import math

import pytest

from ferret.contract import RetrievalRequest
from ferret.envelope import JobEnvelope, deadline_of
from ferret.errors import InvalidRequest
from ferret.settings import LimitSettings

LIMITS = LimitSettings()


def test_what_the_producer_builds_is_what_the_worker_parses():
    request = RetrievalRequest(query="BTC thesis", namespace="me", request_id="r1")
    built = JobEnvelope.new(request, 5.0, memory_version=7, now=1000.0)
    assert built.deadline_at == 1005.0 and len(built.trace_id or "") == 32
    assert JobEnvelope.parse(built.to_payload(), LIMITS) == built


@pytest.mark.parametrize(("payload", "field"), [
    ("text", "payload"),
    ({"request": {"query": "x"}, "enqueued_at": "soon", "deadline_at": 1.0}, "payload.enqueued_at"),
    ({"request": {"query": "x"}, "enqueued_at": 1.0, "deadline_at": math.inf}, "payload.deadline_at"),
    ({"request": {"query": "x"}, "enqueued_at": True, "deadline_at": 1.0}, "payload.enqueued_at"),
    ({"request": {"query": ""}, "enqueued_at": 1.0, "deadline_at": 2.0}, "query"),
    ({"request": {"query": "x", "namespace": "a\n"}, "enqueued_at": 1.0, "deadline_at": 2.0}, "namespace"),
])
def test_a_malformed_payload_names_the_field(payload, field):
    with pytest.raises(InvalidRequest) as raised:
        JobEnvelope.parse(payload, LIMITS)
    assert raised.value.field == field


@pytest.mark.parametrize(("trace_id", "version"), [("../other", -1), ("A" * 32, True), (123, "7")])
def test_a_trace_id_or_version_not_of_the_producers_form_is_dropped(trace_id, version):
    payload = {"request": {"query": "x"}, "enqueued_at": 1.0, "deadline_at": 2.0,
               "trace_id": trace_id, "memory_version": version}
    parsed = JobEnvelope.parse(payload, LIMITS)
    assert parsed.trace_id is None and parsed.memory_version is None


def test_deadline_of_reads_invalid_payloads_leniently():
    assert deadline_of({"deadline_at": 5}) == 5.0
    assert deadline_of({"deadline_at": "5"}) is None and deadline_of(None) is None
