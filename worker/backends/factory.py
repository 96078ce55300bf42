"""Build the configured backend family once per process."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import redis

from ferret.settings import Settings
from ferret.worker.backends.base import Backend
from ferret.worker.backends.local import LocalBackends
from ferret.worker.backends.nous import NousBackends
from ferret.worker.endpoint_health import EndpointHealth
from ferret.worker.semantic.embedders import embedder_for

logger = logging.getLogger(__name__)


class Backends(Protocol):
    def for_namespace(self, namespace: str, at_least: int | None = None,
                      wait_seconds: float | None = None) -> Backend: ...

    def version(self, namespace: str) -> int: ...

    def close(self) -> None: ...


def build_backends(settings: Settings, client: redis.Redis, index_root: Path | None = None,
                   health: EndpointHealth | None = None) -> Backends:
    """``client``: the memory store's (``ferret.redis_plumbing.store_conn``). ``health``: the circuit
    breakers of the outside endpoints (Nous servers, embeddings). ``index_root``: where
    the local backend's indexes live (a forked work horse gets its parent's, so
    what one job built the next one finds). With the semantic retriever on
    (local backend only: a Nous server's search has its own), the embedder is
    made and its model loaded here."""
    if settings.backend.kind == "nous":
        if settings.semantic.enabled:
            logger.warning("semantic.enabled has no effect on the nous backend (its search has its own semantic "
                           "signal); the fusion uses lexical and graph")
        return NousBackends(settings.backend.nous, client=client, health=health)
    semantic = settings.semantic
    embedder = embedder_for(semantic, health.transport(f"embeddings {semantic.base_url}")
                            if health and semantic.enabled and semantic.provider == "endpoint" else None)
    warm = getattr(embedder, "warm", None)
    if warm is not None:
        warm()  # at start-up, before any fork (see ferret.worker.semantic.embedders)
    return LocalBackends(client, settings.co_retrieval, settings.backend.local, index_root,
                         settings.backend.local.store_url or settings.redis.url, embedder)
