"""One table of exit codes, the same for every ``ferret`` command.

| code | meaning |
|---|---|
| 0 | done: what was asked happened (a query's answer is ``ok`` or ``partial``) |
| 1 | done in part: some input lines were invalid, or an answer is ``failed`` or ``expired`` |
| 2 | bad usage or bad input: an invalid option, namespace, request, file or setting |
| 3 | unavailable: Redis (or the memory backend) could not be reached |
| 4 | not found: no job, result or trace under that id |
| 5 | not yet: no answer within ``--wait`` (the job is still queued or running) |
| 6 | bad result: what is stored as the answer is not one, or not this request's (forged or corrupt) |
| 7 | ended by RQ: RQ failed, stopped or cancelled the job with no Ferret result; it will not run again by itself |
"""

from __future__ import annotations

from ferret.errors import BackendError, BadResult, FerretError, JobNotFound, RedisUnreachable, ResultTimeout

OK = 0
PARTLY = 1
USAGE = 2
UNAVAILABLE = 3
NOT_FOUND = 4
NOT_YET = 5
BAD_RESULT = 6
ENDED_BY_RQ = 7


def for_error(exc: FerretError) -> int:
    if isinstance(exc, JobNotFound):
        return NOT_FOUND
    if isinstance(exc, BadResult):
        return BAD_RESULT
    if isinstance(exc, ResultTimeout):
        return NOT_YET
    if isinstance(exc, BackendError | RedisUnreachable):
        return UNAVAILABLE
    return USAGE


def for_status(status: str) -> int:
    """A final status's exit code: ``ok``/``partial`` answer, ``failed``/``expired`` do not."""
    return OK if status in ("ok", "partial") else PARTLY
