"""A carrier's payload (``ferret.carriers``): what a producer makes is read back; anything else is refused
with the reason."""

from __future__ import annotations

import pytest

from ferret.carriers import (
    MAX_MEMBERS,
    NotACarrier,
    carrier_payload,
    is_carrier,
    is_carrier_id,
    members_of,
    new_carrier_id,
)
from ferret.job_ids import job_id_for


def _member(n: int, deadline: float = 100.0) -> tuple[str, dict]:
    return job_id_for("ns", f"line-{n}"), {"request": {"namespace": "ns"}, "deadline_at": deadline}


def test_a_carrier_reads_back_its_members_in_order_with_its_latest_deadline():
    members = [_member(1, 100.0), _member(2, 160.0), _member(3, 130.0)]
    payload = carrier_payload(members)
    assert is_carrier(payload) and payload["deadline_at"] == 160.0
    assert members_of(payload) == members


def test_carrier_ids_are_their_own_form():
    carrier_id = new_carrier_id()
    assert is_carrier_id(carrier_id) and carrier_id != new_carrier_id()
    assert not is_carrier_id(job_id_for("ns", "x")) and not is_carrier_id("fr-c-xyz") and not is_carrier_id(None)
    assert not is_carrier_id(carrier_id.upper())


@pytest.mark.parametrize(("payload", "says"), [
    ([], "not a carrier payload"),
    ({"carrier": True, "members": [list(_member(1))]}, "not a carrier payload"),
    ({"carrier": 1}, "non-empty list"),
    ({"carrier": 1, "members": []}, "non-empty list"),
    ({"carrier": 1, "members": {"a": 1}}, "non-empty list"),
    ({"carrier": 1, "members": [list(_member(n)) for n in range(MAX_MEMBERS + 1)]}, f"at most {MAX_MEMBERS}"),
    ({"carrier": 1, "members": [["rq-job-1", {}]]}, "member 0 is not"),
    ({"carrier": 1, "members": [list(_member(1)), [job_id_for("ns", "2")]]}, "member 1 is not"),
    ({"carrier": 1, "members": [list(_member(1)), list(_member(1))]}, "member 1 repeats"),
    ({"carrier": 1, "members": [[7, {}]]}, "member 0 is not"),
])
def test_anything_else_is_not_a_carrier(payload, says):
    with pytest.raises(NotACarrier, match=says):
        members_of(payload)
