"""The one exception tree of Ferret.

    FerretError                  base of everything Ferret raises on purpose
    ├── ConfigError              settings file or environment is invalid
    ├── InvalidRequest           bad input; ``field`` names what is wrong
    │   ├── InvalidMemory        a memory record (ingest line) is invalid
    │   └── RequestIdTaken       a request id already used for a different request
    ├── BackendError             a memory backend failed; ``backend`` names it
    │   ├── BackendUnavailable   could not connect, timed out, or answered 5xx
    │   ├── BackendProtocolError answered something that is not what we expect
    │   ├── NamespaceNotServed   no memory store is configured for the namespace
    │   └── WriteNotReplicated   a memory write was applied but too few replicas
    │                            confirmed it in time (a failover could lose it)
    ├── RerankFailed             the optional LLM re-rank could not be used;
    │                            ``reason`` is timeout, error or malformed
    ├── JobRefused               a queue entry that is not a request of its job id's
    │                            namespace; not run, nothing written under the id
    ├── StageError               a pipeline stage failed; wraps the cause once
    │                            and carries the stage name
    ├── BadResult                the stored result is not a result, or (ForeignResult)
    │                            not the result of the job, namespace and request asked for
    └── JobNotFound              no job, result or trace under that id

Errors from lower libraries (httpx, redis, pydantic) are translated at the
boundary where they are caught into the most specific class above.
"""

from __future__ import annotations


class FerretError(Exception):
    """Base class of every error Ferret raises on purpose."""


class ConfigError(FerretError):
    """The settings file or the environment overrides are invalid."""


class InvalidRequest(FerretError):
    """Bad input. ``field`` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidMemory(InvalidRequest):
    """A memory record is invalid (e.g. one malformed ingest line)."""


class RequestIdTaken(InvalidRequest):
    """The request id was already used for a different request: well formed, but in conflict with what is
    stored (HTTP 409)."""


class BackendError(FerretError):
    """A memory backend failed."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(f"{backend} backend: {message}")
        self.backend = backend
        self.calls: list[tuple[str, str, float]] = []  # the job's backend calls, for metrics
        self.fallback: str | None = None  # how seed 000's plain-search fallback ended, if it was tried


class BackendUnavailable(BackendError):
    """The backend could not be reached, timed out or answered 5xx."""


class WriteNotReplicated(BackendError):
    """A memory write was applied on its primary, but fewer replicas than
    ``backend.local.store_min_replicas_acked`` confirmed it in time: it is not
    acknowledged (a failover now could lose it); writing it again is safe."""


class BackendProtocolError(BackendError):
    """The backend answered something that does not follow its protocol."""


class NamespaceNotServed(BackendError):
    """The backend has no memory store for this namespace (a Nous server serves one tenant)."""


class ChatFailed(FerretError):
    """A chat-completions call gave no usable answer. ``reason`` (``timeout``,
    ``error``, ``malformed``, ``budget``) is the metric label."""

    what = "chat call"

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{self.what} {reason}: {detail}")
        self.reason = reason


class RerankFailed(ChatFailed):
    """The optional re-rank could not be used; the original order stands."""

    what = "re-rank"


class AgentFailed(ChatFailed):
    """The agent loop could not finish; the fast path's answer stands."""

    what = "agent"


class StageError(FerretError):
    """A pipeline stage failed; the cause is chained."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"stage {stage} failed: {cause}")
        self.stage = stage


class JobRefused(FerretError):
    """A queue entry or payload that is not a request of the namespace its job id names: it is
    not run, and nothing is written under that id (the id's owner may still send its request)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"refused by Ferret ({reason}): {message}")
        self.reason = reason
        self.message = message


class BadResult(FerretError):
    """What is stored as a job's result is not a result (garbage, the wrong shape, a key of
    the wrong type, larger than any result) or not this job's (``ForeignResult``)."""

    def __init__(self, job_id: str, problem: str) -> None:
        super().__init__(f"the stored result of job {job_id} {problem}; not used (someone who can write to "
                         "Redis wrote it, or it is corrupt)")
        self.job_id = job_id
        self.problem = problem


class ForeignResult(BadResult):
    """A well-formed result that names another job, namespace or request than the one asked for."""


class RedisUnreachable(FerretError):
    """Redis could not be reached for as long as the caller would wait."""


class JobNotFound(FerretError):
    """No job, result or trace exists under the given id."""


class ResultTimeout(FerretError, TimeoutError):
    """No final result within the time the caller would wait (the job may still
    finish later: ``rq_state`` says where RQ has it)."""

    def __init__(self, job_id: str, timeout: float, rq_state: str | None, workers: int | None = None) -> None:
        self.job_id, self.timeout, self.rq_state, self.workers = job_id, timeout, rq_state, workers
        where = f"RQ state {rq_state}" if rq_state else "no RQ job"
        serving = "; no worker is serving its queue" if workers == 0 else ""
        super().__init__(f"no final result for job {job_id} after {timeout:g} s ({where}{serving})")
