"""Out-of-memory refusals are retried until Redis has room, logged once;
connection faults keep their bounded retries."""

from __future__ import annotations

import copy
import logging

import pytest
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, OutOfMemoryError, ResponseError, WatchError

from ferret.redis_plumbing import redis_retry
from ferret.redis_plumbing.redis_retry import PatientRetry


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(redis_retry.time, "sleep", lambda seconds: None)


def _failing(errors: list[Exception], answer: str = "OK"):
    def do() -> str:
        if errors:
            raise errors.pop(0)
        return answer
    return do


def test_out_of_memory_is_retried_past_the_connection_retry_limit_and_logged_once(caplog):
    retry = PatientRetry("redis://h/0", NoBackoff(), retries=2)
    caplog.set_level(logging.WARNING, logger="ferret.redis_plumbing.redis_retry")
    errors: list[Exception] = [OutOfMemoryError("OOM command not allowed")] * 50
    assert retry.call_with_retry(_failing(list(errors)), lambda error: None) == "OK"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("is out of memory" in m for m in messages) == 1
    assert sum("has room again" in m for m in messages) == 1


def test_connection_faults_still_give_up():
    retry = PatientRetry("redis://h/0", NoBackoff(), retries=2)
    with pytest.raises(ConnectionError):
        retry.call_with_retry(_failing([ConnectionError("down")] * 5), lambda error: None)


def test_a_watched_transaction_is_handed_back_not_resent():
    retry = PatientRetry("redis://h/0", NoBackoff())

    def fail(error: Exception) -> None:  # what redis-py's pipeline does while watching
        raise WatchError("watch lost")

    with pytest.raises(WatchError):
        retry.call_with_retry(_failing([OutOfMemoryError("OOM")]), fail)


def test_copies_share_one_episode(caplog):
    retry = PatientRetry("redis://h/0", NoBackoff())
    twin = copy.deepcopy(retry)  # redis-py copies the retry into each connection
    caplog.set_level(logging.WARNING, logger="ferret.redis_plumbing.redis_retry")
    retry._episode.full()
    twin.call_with_retry(_failing([OutOfMemoryError("OOM")]), lambda error: None)
    assert sum("is out of memory" in r.getMessage() for r in caplog.records) == 1


def test_redis_6_script_refusals_count_as_out_of_memory_and_other_errors_do_not():
    retry = PatientRetry("redis://h/0", NoBackoff(), retries=2)
    wrapped = ResponseError("Error running script (call to f_1): @user_script:3: @user_script: 3: "
                            "-OOM command not allowed when used memory > 'maxmemory'.")
    assert retry.call_with_retry(_failing([wrapped] * 5), lambda error: None) == "OK"
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        retry.call_with_retry(_failing([ResponseError("WRONGTYPE Operation against a key")]), lambda error: None)
