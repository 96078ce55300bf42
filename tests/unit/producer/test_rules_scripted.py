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
from ferret.steps import Batch, Call, Eval, Now, Replicate

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


def test_an_enqueue_with_a_request_id_claims_it_reads_the_version_and_puts_the_job_in_one_script():
    def answer(op: Any) -> Any:
        return {"SET": True, "EXISTS": 0, "GET": b"7", "Now": 1000.0, "Eval": [1], "Replicate": True}[_command(op)]

    handle, asked = play(RULES.enqueue({"query": "q", "namespace": "ns", "request_id": "r1"}), answer)
    assert [_command(op) for op in asked] == ["SET", "EXISTS", "GET", "Now", "Eval", "Replicate"]
    claim = asked[0].args
    assert claim[0:2] == ("SET", keys.request_job("ns", "r1")) and "NX" in claim
    assert asked[2].args == ("GET", keys.memory_version("ns")) and asked[2].on == "store"
    put = asked[4]
    commands = RULES.enqueue_commands("prefetch", {}, handle.job_id, timeout=1, failure_ttl=1, now=1000.0)
    assert list(put.keys) == [command[1] for command in commands]  # no slot claimed, no conversation
    assert "rq:queue:prefetch" in put.keys and "rq:queue:batch" not in put.keys  # prefetch by default
    assert put.args[1] == "0" and put.args[4] == "0"
    assert handle.job_id == job_id_for("ns", "r1") and handle.memory_version == 7 and not handle.duplicate


def test_a_prefetch_claims_its_twin_slot_in_the_put_and_looks_at_the_holder_when_held():
    holder = "fr-r-" + "a" * 32

    def held(op: Any) -> Any:
        if isinstance(op, Eval):
            return [0]  # the slot is held: nothing was put
        if isinstance(op, Batch):
            return [b"queued", 1, None]  # the holder is a live RQ job (in no carrier)
        if not isinstance(op, Call):
            return 1000.0  # Now
        if op.args[0] == "GET":
            return b"3" if op.args[1] == keys.memory_version("ns") else holder.encode()
        return {"SET": None, "EXISTS": 0}[op.args[0]]  # the slot still held; the holder has no result

    handle, asked = play(RULES.enqueue({"query": "q", "namespace": "ns"}), held)
    assert handle.coalesced and handle.job_id == holder
    put = next(op for op in asked if isinstance(op, Eval))
    assert put.args[1] == "1" and any("inflight" in str(key) for key in put.keys)
    assert not any(isinstance(op, Replicate) for op in asked)  # nothing was put, nothing to replicate


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
            return [None, 0, None]  # no status, no hash, no carrier: RQ has no such job
        return {"EXISTS": 0}[op.args[0]]

    assert play(RULES.lost(handle), gone)[0] is True

    def still_queued(op: Any) -> Any:
        if isinstance(op, Batch):
            return [b"queued", 1, None]
        if isinstance(op, Eval):
            return 1  # on a queue's list
        raise AssertionError(op)

    assert play(RULES.lost(handle), still_queued)[0] is False


def test_a_batch_line_in_a_carrier_is_as_live_as_its_carrier():
    """A line has no RQ job of its own: its pointer names its carrier, whose state (and place on a queue) is
    the line's (``ferret.carriers``)."""
    member, carrier = "fr-" + "1" * 32, "fr-c-" + "2" * 32
    handle = JobHandle(member, "batch", "ns", "r1", "t" * 32)
    looked: list[str] = []

    def queued(op: Any) -> Any:
        if isinstance(op, Batch):
            key = op.calls[0][1]
            looked.append(key)
            return [None, 0, carrier.encode()] if member in key else [b"queued", 1, None]
        if isinstance(op, Eval):
            assert op.args == (carrier,)  # the carrier's id is looked for on the queues, not the line's
            return 1
        raise AssertionError(op)

    assert play(RULES.lost(handle), queued)[0] is False
    assert looked == [f"rq:job:{member}", f"rq:job:{carrier}"]
    assert play(RULES.status(handle), lambda op: {"GETRANGE": b""}[op.args[0]] if isinstance(op, Call)
                else queued(op))[0].rq_state == "queued"

    def pointer_to_a_line(op: Any) -> Any:  # a pointer anyone wrote that names no carrier: not followed
        if isinstance(op, Batch):
            return [None, 0, ("fr-" + "3" * 32).encode()]
        return {"EXISTS": 0}[op.args[0]]

    assert play(RULES.lost(handle), pointer_to_a_line)[0] is True


def test_a_result_is_read_with_a_cap_and_garbage_is_a_bad_result():
    from ferret.errors import BadResult

    found, asked = play(RULES.result("fr-j"), lambda op: b"")
    assert found is None and asked[0].args[:2] == ("GETRANGE", keys.result("fr-j"))  # nothing stored yet
    with pytest.raises(BadResult):
        play(RULES.result("fr-j"), lambda op: b"not a result")


def test_an_agents_usual_prefetch_is_the_version_read_and_one_script():
    from ferret.producer.conversations import ConversationRules

    def answer(op: Any) -> Any:
        return {"GET": b"3", "Now": 1000.0, "Eval": [1, []], "Replicate": True}[_command(op)]

    handle, asked = play(ConversationRules(RULES).prefetch("ns", "chat", "what did I say?"), answer)
    assert [_command(op) for op in asked if not isinstance(op, Now)] == ["GET", "Eval", "Replicate"]
    put = next(op for op in asked if isinstance(op, Eval))
    assert put.args[1] == "1" and put.args[4] == "1"  # the twin slot claimed, the entry pushed
    assert put.args[5].startswith(f"{handle.job_id} 3 ")

    older_id = "fr-r-" + "c" * 32
    older = f"{older_id} 2 990.000000 995.000000 0".encode()

    def predecessor_queued(op: Any) -> Any:
        if isinstance(op, Eval):
            return [older_id.encode()] if "LREM" in op.source else [1, [older]]  # supersede; put
        return answer(op)

    handle, asked = play(ConversationRules(RULES).prefetch("ns", "chat", "what did I say?"), predecessor_queued)
    put, supersede = (op for op in asked if isinstance(op, Eval))
    assert supersede.args[3] == "0" and keys.result(older_id) in supersede.keys  # its entry is not pushed again


def test_reading_a_conversations_newest_context_is_one_script_and_the_version():
    from ferret.contract import RetrievalResult, Timestamps
    from ferret.producer.conversations import ConversationRules
    from ferret.results import stored_result

    job_id = "fr-r-" + "d" * 32
    stored = stored_result(RetrievalResult(job_id=job_id, namespace="ns", queue="prefetch", status="ok",
                                           timestamps=Timestamps(enqueued_at=990.0, deadline_at=995.0,
                                                                 finished_at=991.0)), RULES.signing_key)
    entry = f"{job_id} 3 990.000000 995.000000 0".encode()

    def answer(op: Any) -> Any:
        return {"Eval": [[entry], job_id.encode(), stored], "Now": 1000.0, "GET": b"4"}[_command(op)]

    found, asked = play(ConversationRules(RULES).context_for("ns", "chat"), answer)
    assert [_command(op) for op in asked if not isinstance(op, Now)] == ["Eval", "GET"]
    assert found.result.job_id == job_id and found.stale and found.age_seconds == 9.0

    def pending(op: Any) -> Any:  # the newest has no result yet: the next entry is read as before
        if isinstance(op, Eval):
            return [[entry, b"fr-r-" + b"e" * 32 + b" 3 980.0 985.0 0"], job_id.encode(), None]
        return {"GETRANGE": b"", "Now": 1000.0, "GET": b"4"}[_command(op)]

    found, asked = play(ConversationRules(RULES).context_for("ns", "chat"), pending)
    assert found is None and [_command(op) for op in asked] == ["Eval", "GETRANGE"]


def test_a_job_that_ends_between_the_status_reads_is_seen_with_its_result():
    """The job finishes right after the rule's first read: its result written, then RQ's job forgotten (the
    worker's order). Whichever read comes first, the status says one of the two, never neither."""
    from ferret.contract import RetrievalResult, Timestamps
    from ferret.results import stored_result

    job_id = "fr-r-" + "f" * 32
    stored = stored_result(RetrievalResult(job_id=job_id, namespace="ns", queue="batch", status="ok",
                                           timestamps=Timestamps(enqueued_at=990.0, deadline_at=995.0,
                                                                 finished_at=991.0)), RULES.signing_key)
    world = {"result": b"", "rq": [b"started", 1, None]}  # running: no result yet, RQ's job started
    reads = 0

    def answer(op: Any) -> Any:
        nonlocal reads
        reply = world["rq"] if isinstance(op, Batch) else {"GETRANGE": world["result"]}[op.args[0]]
        reads += 1
        if reads == 1:  # the job ends now: its result, then RQ's success (the job hash deleted)
            world["result"], world["rq"] = stored, [None, 0, None]
        return reply

    state, asked = play(RULES.status(job_id), answer)
    assert len(asked) == 2
    assert state.status == "ok" or state.rq_state is not None, state
