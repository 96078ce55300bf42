"""With ``security.signing_key`` set on producers and workers (both classes):
signed requests run; a job whose payload is unsigned or signed with another
key is refused without running or writing anything under its id; a result
not signed with the key is reported as forged."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from rq import Queue
from rq.serializers import JSONSerializer

from ferret import keys
from ferret.cli import exit_codes
from ferret.contract import JOB_FUNCTION
from ferret.errors import ForeignResult
from ferret.job_ids import job_id_for
from ferret.packed import unpack
from ferret.producer.client import Producer
from ferret.settings import load_settings
from ferret.worker.core.results import REFUSAL_LOG
from tests.conftest import ROOT

KEY = "a-shared-key-of-32-characters-ok"


@pytest.fixture(params=["simple", "fork"])
def signed(request, env, redis_client, sample_namespace, start_workers):
    signed_env = {**env, "FERRET_SECURITY__SIGNING_KEY": KEY}
    start_workers(1, "--worker-class", request.param, extra_env={"FERRET_SECURITY__SIGNING_KEY": KEY})
    return signed_env, Producer(redis_client, load_settings(environ=signed_env))


def _refusal_of(client, job_id: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for raw in client.lrange(REFUSAL_LOG, 0, -1):
            entry = json.loads(raw)
            if entry["job_id"] == job_id:
                return entry
        time.sleep(0.1)
    raise AssertionError(f"{job_id} was not refused")


def test_signed_jobs_run_and_unsigned_or_missigned_ones_are_refused(signed, redis_client, env):
    _, producer = signed
    answer = producer.wait(producer.enqueue({"query": "BTC thesis", "namespace": "sample"}), 20)
    assert answer.status == "ok" and answer.results
    stored = json.loads(unpack(redis_client.get(keys.result(answer.job_id)), 1 << 20))
    assert len(stored["signature"]) == 64  # the worker signed it
    now = time.time()
    unsigned_id = job_id_for("sample", "unsigned")
    Queue("prefetch", connection=redis_client, serializer=JSONSerializer).enqueue_call(
        JOB_FUNCTION, args=({"request": {"query": "BTC", "namespace": "sample", "request_id": "unsigned"},
                             "enqueued_at": now, "deadline_at": now + 20},), job_id=unsigned_id)
    other_key = Producer(redis_client, load_settings(environ={**env, "FERRET_SECURITY__SIGNING_KEY": "x" * 32}))
    missigned = other_key.enqueue({"query": "BTC thesis", "namespace": "sample", "request_id": "other-key"})
    for job_id, words in ((unsigned_id, "not signed"), (missigned.job_id, "does not match")):
        entry = _refusal_of(redis_client, job_id)
        assert entry["reason"] == "bad_signature" and words in entry["message"]
        assert not redis_client.exists(keys.result(job_id))  # nothing written under the id


def test_a_result_not_signed_with_the_key_is_forged(signed, redis_client):
    signed_env, producer = signed
    real = producer.wait(producer.enqueue({"query": "BTC thesis", "namespace": "sample", "request_id": "s1"}), 20)
    job_id = job_id_for("sample", "s2")
    forged = json.loads(unpack(redis_client.get(keys.result(real.job_id)), 1 << 20))
    forged.pop("signature")
    forged.update(job_id=job_id, request_id="s2")  # well formed, the right job, tenant and request
    redis_client.set(keys.result(job_id), json.dumps(forged))
    with pytest.raises(ForeignResult, match="not signed"):
        producer.wait(job_id, 1)
    shown = subprocess.run([sys.executable, "-m", "ferret.cli.main", "result", job_id], env=signed_env, cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == exit_codes.BAD_RESULT and "not signed with the shared key" in shown.stderr
    forged["signature"] = "0" * 64
    redis_client.set(keys.result(job_id), json.dumps(forged, separators=(",", ":")))
    with pytest.raises(ForeignResult, match="does not match"):
        producer.wait(job_id, 1)


def test_a_producer_with_another_key_reads_its_refusal_as_a_failed_end_with_the_hint(signed, env):
    """The workers refuse the job for its signature; its producer ends the wait ``failed`` with the reason and
    what to do (within a failover check or two), instead of enqueueing it again for its whole wait."""
    other = {**env, "FERRET_SECURITY__SIGNING_KEY": "y" * 32}
    ran = subprocess.run([sys.executable, "-m", "ferret.cli.main", "query", "BTC thesis", "-n", "sample", "--wait",
                          "60", "--json"], env=other, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert ran.returncode == exit_codes.PARTLY, ran.stdout + ran.stderr  # a failed answer: exit 1, not 5
    answer = json.loads(ran.stdout)
    assert answer["status"] == "failed" and "bad_signature" in answer["error"]
    assert "the producer's signing key differs from the workers'" in answer["error"]
    assert "enqueued again" not in ran.stderr  # and so its 60 s wait was not spent re-enqueueing


def test_the_same_request_sent_again_after_its_refusal_gets_the_refusal_too(signed, env):
    """An identical prefetch sent again while the refused one's in-flight slot is still held does not join the
    job the workers ended: it runs on its own, is refused the same way, and its wait ends with the reason."""
    other = {**env, "FERRET_SECURITY__SIGNING_KEY": "y" * 32}
    command = [sys.executable, "-m", "ferret.cli.main", "query", "ETH thesis", "-n", "sample", "--wait", "60",
               "--json"]
    for attempt in ("first", "again"):
        ran = subprocess.run(command, env=other, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert ran.returncode == exit_codes.PARTLY, (attempt, ran.stdout + ran.stderr)
        answer = json.loads(ran.stdout)
        assert answer["status"] == "failed" and "bad_signature" in answer["error"], attempt
