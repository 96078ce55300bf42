"""What is stored as a job's result is untrusted: garbage, the wrong shape, a
key of the wrong type, or a real result that belongs to another job or
tenant is a typed error for the Python client and exit code 6 with an
``error:`` line for the CLI, never a traceback or someone else's answer."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib

import pytest

from ferret import keys
from ferret.cli import exit_codes
from ferret.errors import BadResult, ForeignResult
from ferret.job_ids import job_id_for
from ferret.packed import MARK, unpack
from tests.conftest import ROOT


def _ferret(args, env):
    return subprocess.run([sys.executable, "-m", "ferret.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


@pytest.fixture
def real_result(producer, sample_namespace, start_workers):
    start_workers(1)
    handle = producer.enqueue({"query": "BTC thesis", "namespace": sample_namespace, "request_id": "real"})
    assert producer.wait(handle, 20).status == "ok"
    return json.loads(unpack(producer.client.get(keys.result(handle.job_id)), 1 << 20))


@pytest.mark.parametrize("plant", ["garbage", "wrong_shape", "wrong_type", "other_job", "packed_garbage",
                                   "packed_bomb"])
def test_a_bad_stored_result_is_a_typed_error_and_exit_code_6(plant, real_result, producer, redis_client, env):
    job_id = job_id_for("victim", "r1")
    key = keys.result(job_id)
    if plant == "garbage":
        redis_client.set(key, b"\x00\xff not json")
    elif plant == "wrong_shape":
        redis_client.set(key, json.dumps({"job_id": job_id, "status": "ok", "results": "all of them"}))
    elif plant == "wrong_type":
        redis_client.rpush(key, "a list")
    elif plant == "packed_garbage":
        redis_client.set(key, MARK + b"not zlib")
    elif plant == "packed_bomb":  # 64 MiB of zeros in ~64 KB: inflated no further than the read cap
        redis_client.set(key, MARK + zlib.compress(b"0" * (64 << 20), 9))
    else:
        redis_client.set(key, json.dumps(real_result))  # a real answer, of another job and tenant
    with pytest.raises(ForeignResult if plant == "other_job" else BadResult):
        producer.wait(job_id, 1)
    shown = _ferret(["result", job_id], env)
    assert shown.returncode == exit_codes.BAD_RESULT, shown.stderr
    assert shown.stderr.startswith("error: the stored result of job") and "Traceback" not in shown.stderr


def test_a_result_of_the_right_job_id_but_another_tenant_is_foreign(real_result, producer, redis_client, env):
    job_id = job_id_for("victim", "r2")
    redis_client.set(keys.result(job_id), json.dumps({**real_result, "job_id": job_id}))  # names namespace "sample"
    handle = producer.enqueue({"query": "BTC thesis", "namespace": "victim", "request_id": "r2"})
    with pytest.raises(ForeignResult, match="names namespace 'sample'"):
        producer.wait(handle, 2)
    asked = _ferret(["query", "BTC thesis", "-n", "victim", "--request-id", "r2", "--wait", "2"], env)
    assert asked.returncode == exit_codes.BAD_RESULT and "error:" in asked.stderr, asked.stderr


def test_a_batch_reports_a_forged_result_on_its_line_and_goes_on(real_result, redis_client, env, tmp_path):
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"query": "BTC thesis", "namespace": "sample", "request_id": "b1"}) + "\n"
                     + json.dumps({"query": "SOL funding", "namespace": "sample", "request_id": "b2"}) + "\n")
    redis_client.set(keys.result(job_id_for("sample", "b1")), b"forged")
    out = tmp_path / "out.jsonl"
    ran = _ferret(["batch", str(lines), "--out", str(out), "--wait", "30"], env)
    assert ran.returncode == exit_codes.BAD_RESULT, ran.stderr
    rows = {row["request_id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows["b1"]["status"] is None and "not a result" in rows["b1"]["error"]
    assert rows["b2"]["status"] == "ok"
    assert json.loads(ran.stdout.splitlines()[-1])["bad_results"] == 1
