"""Carriers: several lines of a batch in one RQ job (``service.batch_lines_per_job``).

A batch line costs a worker more in RQ's per-job machinery (the job's hash read, its start and success
bookkeeping, RQ's perform) than in its search, and its producer and Redis an enqueue each. A carrier is one
RQ job on the batch queue whose payload holds several lines' payloads, its *members*. Each member stays a
request of its own: its own job id (derived from its namespace and request id, as any line's), claim,
envelope, deadline, trace, result and done token; only the queue entry, the RQ job and its bookkeeping are
shared. Each member's key ``keys.carried_by`` names its carrier, so "what state is this job in" (a wait's
"is it lost?", ``ferret status``, a resumed batch's check of its claims) is answered by the carrier's state.

The payload, ``{"carrier": 1, "deadline_at": ..., "members": [[job_id, payload], ...]}``, is untrusted like
any queue entry: ``members_of`` refuses one that is not this shape or carries more than ``MAX_MEMBERS``
members, and each member is then run as any job is (``run_job``: its id must be the one its namespace and
request id give, so a carrier cannot run one tenant's request under another's id). The carrier's deadline
is its latest member's (the reaper's "overdue", the trip's order); its signature, when signing is on, is
checked once for all members (it covers them).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ferret.envelope import deadline_of
from ferret.job_ids import is_ferret_job_id

CARRIER_PREFIX = "fr-c-"
CARRIER_FIELD = "carrier"
MEMBERS_FIELD = "members"
MAX_MEMBERS = 256
_CARRIER_ID = re.compile(re.escape(CARRIER_PREFIX) + r"[0-9a-f]{32}")  # as ferret.job_ids writes its own


def new_carrier_id() -> str:
    return CARRIER_PREFIX + uuid.uuid4().hex


def is_carrier_id(value: Any) -> bool:
    return isinstance(value, str) and _CARRIER_ID.fullmatch(value) is not None


def carrier_payload(members: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The payload of a carrier of ``members`` (job id, payload), its deadline their latest."""
    deadlines = [deadline_of(payload) for _, payload in members]
    return {CARRIER_FIELD: 1, "deadline_at": max(d for d in deadlines if d is not None),
            MEMBERS_FIELD: [[job_id, payload] for job_id, payload in members]}


def is_carrier(payload: Any) -> bool:
    """Whether a payload says it is a carrier (checked further by ``members_of``)."""
    return isinstance(payload, dict) and CARRIER_FIELD in payload


class NotACarrier(ValueError):
    """A payload that says it is a carrier but is not one a producer makes."""


def members_of(payload: Any) -> list[tuple[str, Any]]:
    """A carrier's members (job id, payload), in order; ``NotACarrier`` saying why when the payload is not
    a carrier's. A member's payload is not looked at here: it is run (and refused or not) as any job's."""
    if not isinstance(payload, dict) or type(payload.get(CARRIER_FIELD)) is not int or payload[CARRIER_FIELD] != 1:
        raise NotACarrier("not a carrier payload (its 'carrier' field is not 1)")
    members = payload.get(MEMBERS_FIELD)
    if not isinstance(members, list) or not members:
        raise NotACarrier("a carrier's 'members' is a non-empty list")
    if len(members) > MAX_MEMBERS:
        raise NotACarrier(f"a carrier carries at most {MAX_MEMBERS} members, this one {len(members)}")
    found: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for number, member in enumerate(members):
        if not (isinstance(member, list) and len(member) == 2 and isinstance(member[0], str)
                and is_ferret_job_id(member[0])):
            raise NotACarrier(f"member {number} is not [a Ferret job id, its payload]")
        if member[0] in seen:
            raise NotACarrier(f"member {number} repeats job id {member[0]}")
        seen.add(member[0])
        found.append((member[0], member[1]))
    return found
