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

from ferret.carriers import NotACarrier, is_carrier, members_of
from ferret.errors import FerretError, JobRefused
from ferret.settings import load_settings
from ferret.signing import job_signature_problem
from ferret.worker.core.report import JobReport
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.core.results import NO_TRACE, build_result, record_refusal, stamps_of_invalid, trace_id_of
from ferret.worker.core.run import run_job

logger = logging.getLogger(__name__)


def resources_for(job: Job) -> WorkerResources:
    """The resources this job runs with in this process."""
    shared: WorkerResources | None = getattr(job, "ferret_resources", None)
    if shared is not None:
        return shared.for_this_process(job.connection)
    return build_resources(load_settings(), job.connection)  # RQ ran it outside a Ferret worker


def report_of(job: Job) -> JobReport | None:
    """The report this process's run of ``job`` left on it (None in a forking worker's parent, and for a
    carrier: ``reports_of``)."""
    return getattr(job, "ferret_report", None)


def reports_of(job: Job) -> list[JobReport] | None:
    """The reports of a carrier's members this process ran (None: it ran no carrier here)."""
    return getattr(job, "ferret_reports", None)


def run_retrieval(payload: Any) -> dict[str, Any]:
    """RQ entry point. Returns a small JSON-able summary; the result is in Redis."""
    job = get_current_job()
    if job is None:
        raise FerretError("run_retrieval runs inside an RQ job")
    resources = resources_for(job)
    if is_carrier(payload):
        reports = run_carrier(resources, job, payload)
        job.ferret_reports = reports  # type: ignore[attr-defined]
        return {"members": len(reports)}
    report = _run_one(resources, payload, job.id, job.origin, getattr(job, "ferret_hold", None))
    job.ferret_report = report  # type: ignore[attr-defined]
    return {"status": report.result.status, "results": len(report.result.results)}


def _run_one(resources: WorkerResources, payload: Any, job_id: str, origin: str, hold: Any,
             signature_checked: bool = False) -> JobReport:
    try:
        return run_job(resources, payload, job_id, origin, hard_timeout=JobTimeoutException, hold=hold,
                       signature_checked=signature_checked)
    except JobRefused:  # RQ marks the job failed; nothing of Ferret's is written under its id
        raise
    except Exception as exc:  # last line of defence (the result write itself failed): still one final result
        logger.exception("job=%s unexpected failure", job_id)
        now = resources.now()
        stamps = stamps_of_invalid(payload, job_id, origin, now)
        result = build_result(resources, stamps, None, "failed", now, NO_TRACE,
                              error=f"internal error: {type(exc).__name__}: {exc}")
        resources.results.write(result, None)
        return JobReport(result, None)


def run_carrier(resources: WorkerResources, job: Job, payload: Any) -> list[JobReport]:
    """A carrier's members, each run as a job of its own (``ferret.carriers``), in order; the reports of
    those run. A member with a result already (the carrier is run again after its worker was lost) is not
    run again; a member refused (its id is not its request's) is refused alone. The carrier's signature is
    checked once: it covers its members. A carrier that is not one is refused whole, nothing run."""
    key = resources.results.signing_key
    problem = job_signature_problem(key, job.id, payload) if key is not None else None
    if problem is not None:
        raise record_refusal(resources, job.id, job.origin, "bad_signature", problem, trace_id_of(payload))
    try:
        members = members_of(payload)
    except NotACarrier as exc:
        raise record_refusal(resources, job.id, job.origin, "malformed_job", str(exc)) from None
    answered = resources.results.answered([member_id for member_id, _ in members])
    hold = getattr(job, "ferret_hold", None)
    reports = []
    for member_id, member_payload in members:
        if member_id in answered:
            continue
        try:
            reports.append(_run_one(resources, member_payload, member_id, job.origin, hold,
                                    signature_checked=key is not None))
        except JobRefused:  # recorded under the member's id (its producer reads why); the others run
            continue
    return reports
