import json

from ferret.signing import job_signature_problem, result_signature_holds, sign_job, sign_result, split_result

KEY = b"k" * 32


def test_a_signed_job_holds_only_for_its_own_id_and_content():
    payload = {"request": {"query": "BTC", "namespace": "a"}, "enqueued_at": 1.5, "deadline_at": 6.5}
    signed = sign_job(KEY, "fr-1", payload)
    round_tripped = json.loads(json.dumps(signed))  # as RQ's JSON serializer gives it back
    assert job_signature_problem(KEY, "fr-1", round_tripped) is None
    assert "does not match" in job_signature_problem(KEY, "fr-2", round_tripped)  # moved to another id
    assert "does not match" in job_signature_problem(b"x" * 32, "fr-1", round_tripped)  # another key
    tampered = {**round_tripped, "request": {"query": "BTC", "namespace": "b"}}
    assert "does not match" in job_signature_problem(KEY, "fr-1", tampered)
    assert "not signed" in job_signature_problem(KEY, "fr-1", payload)
    assert "not signed" in job_signature_problem(KEY, "fr-1", ["not", "a", "dict"])


def test_a_signed_result_is_its_exact_bytes_plus_one_member():
    body = json.dumps({"job_id": "fr-1", "status": "ok", "results": []}).encode()
    stored = sign_result(KEY, body)
    assert json.loads(stored)["job_id"] == "fr-1" and "signature" in json.loads(stored)
    found, signature = split_result(stored)
    assert found == body and result_signature_holds(KEY, found, signature)
    forged, forged_signature = split_result(stored.replace(b'"ok"', b'"failed"'))
    assert not result_signature_holds(KEY, forged, forged_signature)
    assert split_result(body) == (body, None) and not result_signature_holds(KEY, body, None)
