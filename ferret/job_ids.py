"""Job ids, and the binding between a job id and the request it runs.

A request with a ``request_id`` has a derived id, ``fr-`` and 32 hex digits
of a hash of (namespace, request id): the same request is the same job. One
without has a random id, ``fr-r-`` and 32 hex digits. The two forms cannot
be confused, so a worker can check that the payload it is about to run is
the one its id names: a payload carrying tenant A's request under an id
derived for tenant B is refused, not run.
"""

from __future__ import annotations

import hashlib
import re
import uuid

DERIVED_PREFIX = "fr-"
RANDOM_PREFIX = "fr-r-"
_FERRET_ID = re.compile(r"fr-(?:r-)?[0-9a-f]{32}")


def job_id_for(namespace: str, request_id: str | None) -> str:
    """The job id of a request: derived from (namespace, request id), else random."""
    if request_id is None:
        return RANDOM_PREFIX + uuid.uuid4().hex
    digest = hashlib.sha256(f"{namespace}\0{request_id}".encode()).hexdigest()[:32]
    return DERIVED_PREFIX + digest


def is_ferret_job_id(job_id: str) -> bool:
    """True for ids of either form a Ferret producer makes."""
    return _FERRET_ID.fullmatch(job_id) is not None


def binds(job_id: str, namespace: str, request_id: str | None) -> bool:
    """Whether ``job_id`` is the id a producer gives this (namespace, request id)."""
    if request_id is None:
        return job_id.startswith(RANDOM_PREFIX) and is_ferret_job_id(job_id)
    return job_id == job_id_for(namespace, request_id)
