"""Build a worker's co-retrieval applier for the configured backend."""

from __future__ import annotations

from ferret.worker.backends.nous import NousBackend
from ferret.worker.co_retrieval.affinity import RedisAffinity
from ferret.worker.co_retrieval.applier import CoRetrievalApplier, Strengthen
from ferret.worker.co_retrieval.nous_edges import strengthen_edges
from ferret.worker.core.resources import WorkerResources
from ferret.worker.metrics import FerretMetrics


def co_retrieval_applier(context: WorkerResources, metrics: FerretMetrics) -> CoRetrievalApplier:
    settings = context.settings.co_retrieval
    strengthen: Strengthen
    if context.settings.backend.kind == "nous":
        def strengthen(namespace: str, groups: list[list[str]], amount: float) -> int:
            backend = context.backends.for_namespace(namespace)  # the namespace's own Nous server
            assert isinstance(backend, NousBackend)
            return strengthen_edges(backend, groups, amount, settings.timeout_seconds)
    else:
        def strengthen(namespace: str, groups: list[list[str]], amount: float) -> int:
            return RedisAffinity(context.memory_store, namespace).strengthen(groups, amount)
    return CoRetrievalApplier(strengthen, settings.max_group_size, settings.max_pending,
                              metrics.observe_co_retrieval)
