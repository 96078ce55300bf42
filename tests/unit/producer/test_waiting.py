"""The one wait policy of both clients, played with scripted answers and a scripted clock: no Redis."""

from __future__ import annotations

import pytest
import redis

from ferret.contract import parse_request
from ferret.errors import ForeignResult, RedisUnreachable, ResultTimeout
from ferret.producer.rules import JobHandle, ProducerRules
from ferret.producer.waiting import AwaitResult, Pause, RunRule, waiting
from ferret.settings import load_settings

RULES = ProducerRules(load_settings(environ={}))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _result(namespace: str = "n", request_id: str | None = None):
    from ferret.contract import RetrievalResult

    return RetrievalResult.model_validate({"job_id": "j", "request_id": request_id, "namespace": namespace,
                                           "queue": "prefetch", "status": "ok",
                                           "timestamps": {"enqueued_at": 1.0, "deadline_at": 2.0}})


def _handle(with_request: bool = True) -> JobHandle:
    request = parse_request({"query": "q", "namespace": "n"}, RULES.settings.limits) if with_request else None
    return JobHandle("j", "prefetch", "n", None, "t", request=request)


def test_a_result_at_the_first_wait_is_the_answer():
    policy = waiting(RULES, _handle(), 10.0, 2.0, Clock())
    action = next(policy)
    assert action == AwaitResult("j", 2.0)  # watched: a slice of failover_check_seconds
    with pytest.raises(StopIteration) as done:
        policy.send(_result())
    assert done.value.value.namespace == "n"


def test_a_lost_job_is_enqueued_again_then_waited_for():
    clock = Clock()
    policy = waiting(RULES, _handle(), 10.0, 2.0, clock)
    next(policy)
    clock.now += 2.0
    lost = policy.send(None)
    assert isinstance(lost, RunRule) and lost.step.__name__ == "lost"
    refused = policy.send(True)
    assert isinstance(refused, RunRule) and refused.step.__name__ == "refused"
    again = policy.send(None)  # not refused: a failover lost it
    assert isinstance(again, RunRule) and again.step.__name__ == "enqueue_again"
    assert isinstance(policy.send(None), AwaitResult)


def test_a_lost_job_the_workers_refused_ends_with_the_refusal():
    clock = Clock()
    policy = waiting(RULES, _handle(), 10.0, 2.0, clock)
    next(policy)
    clock.now += 2.0
    policy.send(None)
    policy.send(True)  # lost
    refusal = _result().model_copy(update={"status": "failed", "error": "refused by the workers (bad_signature)"})
    with pytest.raises(StopIteration) as done:
        policy.send(refusal)
    assert done.value.value.status == "failed" and "bad_signature" in done.value.value.error


def test_the_time_running_out_ends_in_the_rules_timeout_error():
    clock = Clock()
    policy = waiting(RULES, "j", 5.0, 2.0, clock)
    assert next(policy) == AwaitResult("j", 5.0)  # a bare id: no watch, one wait for the whole time
    clock.now += 5.0
    timed_out = policy.send(None)
    assert isinstance(timed_out, RunRule) and timed_out.step.__name__ == "timed_out"
    with pytest.raises(ResultTimeout):
        policy.send(ResultTimeout("j", 5.0, "queued", 1))


def test_redis_away_is_waited_out_and_still_away_at_the_end_is_unreachable():
    clock = Clock()
    policy = waiting(RULES, "j", 3.0, 2.0, clock)
    next(policy)
    pause = policy.throw(redis.ConnectionError("refused"))
    assert pause == Pause(1.0)
    clock.now += 1.0
    assert isinstance(policy.send(None), AwaitResult)
    clock.now += 2.0
    pause = policy.throw(redis.ConnectionError("refused"))
    assert isinstance(pause, Pause)
    with pytest.raises(RedisUnreachable):
        policy.send(None)


def test_a_result_for_another_namespace_is_refused():
    policy = waiting(RULES, _handle(), 10.0, 2.0, Clock())
    next(policy)
    with pytest.raises(ForeignResult):
        policy.send(_result(namespace="other"))


def _run_refused(raw, trace_id="t" * 32, coalesced=False):
    """``ProducerRules.refused`` played with a scripted GET reply and clock."""
    handle = JobHandle("j", "prefetch", "n", None, trace_id, deadline_at=200.0, coalesced=coalesced)
    step = RULES.refused(handle)
    call = next(step)
    assert call.args == ("GET", "ferret:refusal:j")
    try:
        now = step.send(raw)
    except StopIteration as done:
        return done.value
    with pytest.raises(StopIteration) as done:
        step.send(150.0) if now is not None else None
    return done.value.value


def test_a_refusal_ends_the_job_only_with_the_producers_own_trace_id():
    import json

    mine = json.dumps({"reason": "bad_signature", "message": "signature does not match", "trace_id": "t" * 32})
    ended = _run_refused(mine)
    assert ended.status == "failed" and "the producer's signing key differs from the workers'" in ended.error
    assert _run_refused(mine.replace("t" * 32, "u" * 32)) is None  # someone else's entry: not this job's end
    assert _run_refused(b"not json") is None and _run_refused(None) is None
    assert _run_refused(json.dumps({"reason": 1, "message": "x", "trace_id": "t" * 32})) is None


def test_a_joined_job_the_workers_refused_ends_its_joiners_wait_with_the_refusal():
    """A request that joined an identical one in flight (its handle has no request and no trace id of its own)
    is watched for the refusal too, and never enqueues the other's job again."""
    import json

    clock = Clock()
    joined = JobHandle("j", "prefetch", "n", None, "", duplicate=True, coalesced=True)
    policy = waiting(RULES, joined, 10.0, 2.0, clock)
    assert next(policy) == AwaitResult("j", 2.0)
    clock.now += 2.0
    assert policy.send(None).step.__name__ == "lost"
    assert policy.send(True).step.__name__ == "refused"
    assert isinstance(policy.send(None), AwaitResult)  # lost, not refused: waited for, not enqueued again
    theirs = json.dumps({"reason": "bad_signature", "message": "signature does not match", "trace_id": "u" * 32})
    ended = _run_refused(theirs, trace_id="", coalesced=True)
    assert ended.status == "failed" and "bad_signature" in ended.error and ended.trace_id == "u" * 32
