"""RQ's way into the job core: the function RQ calls for a Ferret job.

A Ferret worker (``ferret.rq_layer.runner``) puts its ``WorkerResources`` on the RQ
job object before RQ performs it; a forked work horse builds its own from
the same settings (clients do not survive a fork). The core's report goes
back on the job object, where the worker's observers find it (a forking
worker's parent reads the stored result instead). Nothing is kept in module
state.
"""

from __future__ import annotations

import logging
from typing import Any

from rq import get_current_job
from rq.job import Job
from rq.timeouts import JobTimeoutException

from ferret.errors import FerretError, JobRefused
from ferret.settings import load_settings
from ferret.worker.core.report import JobReport
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.core.results import NO_TRACE, build_result, stamps_of_invalid
from ferret.worker.core.run import run_job

logger = logging.getLogger(__name__)


def resources_for(job: Job) -> WorkerResources:
    """The resources this job runs with in this process."""
    shared: WorkerResources | None = getattr(job, "ferret_resources", None)
    if shared is not None:
        return shared.for_this_process(job.connection)
    return build_resources(load_settings(), job.connection)  # RQ ran it outside a Ferret worker


def report_of(job: Job) -> JobReport | None:
    """The report this process's run of ``job`` left on it (None in a forking worker's parent)."""
    return getattr(job, "ferret_report", None)


def run_retrieval(payload: Any) -> dict[str, Any]:
    """RQ entry point. Returns a small JSON-able summary; the result is in Redis."""
    job = get_current_job()
    if job is None:
        raise FerretError("run_retrieval runs inside an RQ job")
    resources = resources_for(job)
    try:
        report = run_job(resources, payload, job.id, job.origin, hard_timeout=JobTimeoutException,
                         hold=getattr(job, "ferret_hold", None))
    except JobRefused:  # RQ marks the job failed; nothing of Ferret's is written under its id
        raise
    except Exception as exc:  # last line of defence (the result write itself failed): still one final result
        logger.exception("job=%s unexpected failure", job.id)
        now = resources.now()
        stamps = stamps_of_invalid(payload, job.id, job.origin, now)
        result = build_result(resources, stamps, None, "failed", now, NO_TRACE,
                              error=f"internal error: {type(exc).__name__}: {exc}")
        resources.results.write(result, None)
        report = JobReport(result, None)
    job.ferret_report = report  # type: ignore[attr-defined]
    return {"status": report.result.status, "results": len(report.result.results)}
