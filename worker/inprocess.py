"""Run one request in this process, exactly as a worker would, without a queue."""

from __future__ import annotations

from typing import Any

import redis

from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.envelope import JobEnvelope
from ferret.job_ids import job_id_for
from ferret.settings import Settings
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.core.run import run_job


def run_in_process(client: redis.Redis, settings: Settings, request: RetrievalRequest,
                   context: WorkerResources | None = None) -> tuple[RetrievalResult, dict[str, Any]]:
    """Run ``request`` through the job adapter; return the result and its trace."""
    ctx = context or build_resources(settings, client)
    deadline = request.deadline_seconds or settings.service.prefetch_deadline_seconds
    envelope = JobEnvelope.new(request, deadline)  # the memory version: the worker reads the store's
    result = run_job(ctx, envelope.to_payload(), job_id_for(request.namespace, request.request_id)).result
    trace = ctx.results.trace(result.trace_id) if result.trace_id else None
    return result, trace or {"trace_id": result.trace_id, "spans": []}
