"""What a worker process builds once and every job uses: clients, indexes, the result store."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from ferret.cache import answer_fingerprint
from ferret.redis_plumbing.clock import RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.redis_plumbing.store_conn import store_client
from ferret.results import ResultStore
from ferret.settings import Settings
from ferret.worker.agent.job import agent_chat
from ferret.worker.backends.factory import Backends, build_backends
from ferret.worker.endpoint_health import EndpointHealth
from ferret.worker.llm.chat import ChatClient, chat_endpoint
from ferret.worker.llm.reranker import LLMScorer


@dataclass
class WorkerResources:
    settings: Settings
    client: redis.Redis
    backends: Backends
    results: ResultStore
    name: str  # host:pid, as it appears in results
    scorer: LLMScorer | None = None  # the re-rank stage's LLM, when switched on
    agent_chat: ChatClient | None = None  # the agent loop's LLM, when switched on
    fingerprint: str = ""  # what decides an answer besides request and memories (ferret.cache)
    index_root: Path | None = None  # the local backend's index directory (a work horse shares its parent's)
    clock: RedisClock | None = None  # Redis's clock: what hosts compare (ferret.redis_plumbing.clock)
    store: redis.Redis | None = None  # the memory store's client (ferret.redis_plumbing.store_conn); None: ``client``
    health: EndpointHealth | None = None  # the outside endpoints' circuit breakers (ferret.worker.endpoint_health)

    @property
    def memory_store(self) -> redis.Redis:
        return self.store if self.store is not None else self.client

    def now(self) -> float:
        """Epoch seconds on Redis's clock."""
        return self.clock.time() if self.clock is not None else time.time()

    @property
    def pid(self) -> int:
        return int(self.name.rsplit(":", 1)[1])

    def for_this_process(self, client: redis.Redis | None = None) -> WorkerResources:
        """These resources, or new ones from the same settings in a forked child
        (clients, the store's included, and HTTP pools do not survive a fork; settings must: a work
        horse of ``ferret --config FILE worker`` runs with FILE's settings)."""
        if self.pid == os.getpid():
            return self
        client = client or self.client
        clock = self.clock.for_client(client) if self.clock is not None else None
        replicas = self.results.replicas.for_client(client) if self.results.replicas is not None else None
        return build_resources(self.settings, client, self.index_root, clock, replicas)


def build_resources(settings: Settings, client: redis.Redis, index_root: Path | None = None,
                    clock: RedisClock | None = None, replicas: ReplicaWait | None = None) -> WorkerResources:
    """Build the per-process clients; called at worker start-up (and in a forked child)."""
    store = store_client(settings, client)
    health = EndpointHealth(client, settings.breaker)
    backends = build_backends(settings, store, index_root, health)
    clock = clock or RedisClock(client)
    return WorkerResources(
        settings=settings,
        client=client,
        backends=backends,
        results=ResultStore(client, settings.service.result_ttl_seconds, settings.service.trace_ttl_seconds,
                             settings.cache.max_entries, settings.service.ttls(), clock,
                             replicas or ReplicaWait(client, settings.redis.min_replicas_acked,
                                                     settings.redis.replica_ack_timeout_ms),
                             settings.security.key()),
        name=f"{socket.gethostname()}:{os.getpid()}",
        scorer=LLMScorer(settings.rerank, ChatClient(settings.rerank, health.transport(chat_endpoint(settings.rerank))))
        if settings.rerank.enabled else None,
        agent_chat=agent_chat(settings.agent, health.transport(chat_endpoint(settings.agent)))
        if settings.agent.enabled else None,
        fingerprint=answer_fingerprint(settings),
        index_root=getattr(backends, "index_root", None),
        clock=clock,
        store=store,
        health=health,
    )
