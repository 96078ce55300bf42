import json
import re

from hypothesis import example, given
from hypothesis import strategies as st

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


_MEMBER = b',"signature":"'
_PIECES = st.sampled_from([_MEMBER, b'"}', b"}", b" ", b"\n", b"0123456789abcdef" * 4, b'{"x":', b'"', b",", b"Z"])
_TAILS = st.one_of(st.just(b""), st.builds(lambda digits, space: _MEMBER + digits + b'"}' + space,
                                           st.sampled_from([b"0" * 64, b"0123456789abcdef" * 4, b"f" * 63]),
                                           st.sampled_from([b"", b" ", b"\n", b" \n"])))


@given(st.binary(max_size=8), st.lists(_PIECES, max_size=10), _TAILS)
@example(b"", [_MEMBER, b"a" * 64, b'"}', b'{"x":'], _MEMBER + b"b" * 64 + b'"}')  # the name twice
def test_the_signature_is_found_where_a_search_of_the_whole_result_finds_it(noise, pieces, tail):
    """``split_result`` looks for the signature only at the one place it can start (its length back from the
    last byte that is not white space); it finds what a regular-expression search through the whole stored
    result finds, for any bytes."""
    raw = noise + b"".join(pieces) + tail
    found = re.search(rb',"signature":"([0-9a-f]{64})"\}\s*$', raw)
    searched = (raw, None) if found is None else (raw[:found.start()] + b"}", found.group(1).decode())
    assert split_result(raw) == searched


def test_a_signed_result_with_the_member_name_inside_its_text_still_splits():
    body = json.dumps({"job_id": "fr-1", "context": ',"signature":"' + "a" * 64 + '"}'}).encode()
    found, signature = split_result(sign_result(KEY, body))
    assert found == body and result_signature_holds(KEY, found, signature)
