"""Ferret's retrieval as a plain task, for the queue engines ``ferret bench queue-peers`` compares Ferret's
worker with: the same settings, backend and pipeline a Ferret worker runs, behind arq's and raw RQ's own
job handling instead of Ferret's (no envelope, no result document, no trace, no result write). Raw RQ
runs ``retrieve`` (``ferret.rq_layer.raw_baseline.RawWork``); arq runs ``arq_retrieve``.

arq is a dependency of this benchmark only (``pip install --no-deps arq``: arq 0.28 declares redis-py below 6
and pip would replace Ferret's; it runs on Ferret's redis-py); nothing else imports it."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import redis

from ferret.settings import load_settings
from ferret.worker.core.resources import WorkerResources, build_resources
from ferret.worker.pipeline.orchestrator import run_pipeline

NAMESPACE_VARIABLE = "PEER_WORK_NAMESPACE"  # not FERRET_*: those are settings
_RESOURCES: list[WorkerResources] = []


def _resources() -> WorkerResources:
    if not _RESOURCES:
        settings = load_settings()
        _RESOURCES.append(build_resources(settings, redis.Redis.from_url(os.environ["FERRET_REDIS__URL"])))
    return _RESOURCES[0]


def retrieve(query: str) -> int:
    """The pipeline on the benchmark's namespace, as a Ferret worker runs it; the number of hits."""
    resources = _resources()
    backend = resources.backends.for_namespace(os.environ.get(NAMESPACE_VARIABLE, "overhead"))
    return len(run_pipeline(query, backend, resources.settings.pipeline).hits)


async def arq_retrieve(ctx: dict[str, Any], query: str) -> int:
    return retrieve(query)


def run_arq_worker() -> None:
    """An arq worker serving ``arq_retrieve`` (arq's defaults, as a user would start it)."""
    from arq.connections import RedisSettings
    from arq.worker import run_worker

    class Settings:
        functions: ClassVar = [arq_retrieve]
        redis_settings = RedisSettings.from_dsn(os.environ["FERRET_REDIS__URL"])
        log_results = False

    run_worker(Settings)  # type: ignore[arg-type]


ARQ_WORKER = "from ferret.bench.peer_work import run_arq_worker; run_arq_worker()"
