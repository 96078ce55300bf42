"""The producer's rules played with scripted replies and no Redis (as h11's tests play its protocol): what each
rule asks of Redis, in order, and what it makes of the answers. Both clients run these same rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ferret import keys
from ferret.contract import parse_request
from ferret.errors import InvalidRequest
from ferret.job_ids import job_id_for
from ferret.producer.rules import JobHandle, ProducerRules, request_digest
from ferret.settings import load_settings
from ferret.steps import Batch, Call, Eval, Replicate

RULES = ProducerRules(load_settings(environ={}))


def play(rule, answer: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
    """Run a rule, each operation answered by ``answer``; its result and the operations it asked for."""
    asked: list[Any] = []
    reply: Any = None
    while True:
        try:
            op = rule.send(reply)
        except StopIteration as done:
            return done.value, asked
        asked.append(op)
        reply = answer(op)


def _command(op: Any) -> str:
    if isinstance(op, Call):
        return op.args[0]
    return type(op).__name__


def test_an_enqueue_with_a_request_id_claims_it_reads_the_version_and_sends_one_transaction():
    def answer(op: Any) -> Any:
        return {"SET": True, "EXISTS": 0, "GET": b"7", "Now": 1000.0, "Batch": [1, 1, 1, 1],
                "Replicate": True}[_command(op)]

    handle, asked = play(RULES.enqueue({"query": "q", "namespace": "ns", "request_id": "r1"}), answer)
    assert [_command(op) for op in asked] == ["SET", "EXISTS", "GET", "Now", "Batch", "Replicate"]
    claim = asked[0].args
    assert claim[0:2] == ("SET", keys.request_job("ns", "r1")) and "NX" in claim
    assert asked[2].args == ("GET", keys.memory_version("ns")) and asked[2].on == "store"
    enqueue = asked[4]
    assert isinstance(enqueue, Batch) and enqueue.transaction
    assert any(c[0] == "RPUSH" and c[1] == "rq:queue:batch" for c in enqueue.calls) is False  # prefetch by default
    assert any(c[0] == "RPUSH" and c[1] == "rq:queue:prefetch" for c in enqueue.calls)
    assert handle.job_id == job_id_for("ns", "r1") and handle.memory_version == 7 and not handle.duplicate


def test_the_same_request_id_again_is_the_same_job_and_nothing_is_enqueued():
    request = parse_request({"query": "q", "namespace": "ns", "request_id": "r1"}, RULES.settings.limits)
    claimed = f"{'t' * 32}:{request_digest(request)}".encode()

    def answer(op: Any) -> Any:
        if isinstance(op, Call):
            return {"SET": None, "GET": claimed, "EXISTS": 1}[op.args[0]]
        raise AssertionError(f"an enqueue of a claimed request asked for {op}")

    handle, asked = play(RULES.enqueue(request), answer)
    assert handle.duplicate and handle.trace_id == "t" * 32
    assert not any(isinstance(op, Batch | Replicate) for op in asked)


def test_a_request_id_claimed_by_another_request_is_refused_naming_the_field():
    other = b"t" * 32 + b":0123456789abcdef"

    def answer(op: Any) -> Any:
        return {"SET": None, "GET": other}[op.args[0]]

    with pytest.raises(InvalidRequest) as refused:
        play(RULES.enqueue({"query": "q", "namespace": "ns", "request_id": "r1"}), answer)
    assert refused.value.field == "request_id"


def test_lost_is_a_job_rq_no_longer_has_and_no_result():
    handle = JobHandle("fr-j", "prefetch", "ns", None, "t" * 32)

    def gone(op: Any) -> Any:
        if isinstance(op, Batch):
            return [None, 0]  # no status, no hash: RQ has no such job
        return {"EXISTS": 0}[op.args[0]]

    assert play(RULES.lost(handle), gone)[0] is True

    def still_queued(op: Any) -> Any:
        if isinstance(op, Batch):
            return [b"queued", 1]
        if isinstance(op, Eval):
            return 1  # on a queue's list
        raise AssertionError(op)

    assert play(RULES.lost(handle), still_queued)[0] is False


def test_a_result_is_read_with_a_cap_and_garbage_is_a_bad_result():
    from ferret.errors import BadResult

    found, asked = play(RULES.result("fr-j"), lambda op: b"")
    assert found is None and asked[0].args[:2] == ("GETRANGE", keys.result("fr-j"))  # nothing stored yet
    with pytest.raises(BadResult):
        play(RULES.result("fr-j"), lambda op: b"not a result")
