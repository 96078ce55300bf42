"""The blocking producer: ``ferret.producer.rules`` run with redis-py's blocking client.

See ``ferret.producer.rules`` for what enqueueing does (ids, claims, coalescing,
deadlines); ``AsyncProducer`` (``ferret.producer.async_client``) runs the same
rules on an event loop. Waiting blocks on the job's done list (a BLMOVE of the list onto itself), in
slices, and enqueues again a job a failover lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, TypeVar

import redis

from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.producer.carried import enqueue_carried
from ferret.producer.conversations import ConversationContext, ConversationRules
from ferret.producer.rules import JobHandle, JobState, ProducerRules
from ferret.producer.waiting import AWAY_ERRORS, Action, AwaitResult, RunRule, waiting
from ferret.redis_plumbing.clock import RedisClock
from ferret.redis_plumbing.replication import ReplicaWait
from ferret.redis_plumbing.store_conn import store_client
from ferret.results import ResultStore
from ferret.rq_layer.producer_side import RQQueues, workers_serving
from ferret.settings import Settings
from ferret.steps import Step, drive
from ferret.steps_sync import SyncSteps

__all__ = ["JobHandle", "JobState", "Producer"]

T = TypeVar("T")
logger = logging.getLogger(__name__)


class Producer:
    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.clock = RedisClock(client)  # the workers judge the deadline on Redis's clock too
        self.results = ResultStore(client, settings.service.result_ttl_seconds, settings.service.trace_ttl_seconds,
                                   settings.cache.max_entries, settings.service.ttls(), self.clock,
                                   signing_key=settings.security.key())
        self.queues = RQQueues(client, self.clock)
        self.replicas = ReplicaWait(client, settings.redis.min_replicas_acked, settings.redis.replica_ack_timeout_ms)
        self.store = store_client(settings, client)  # where the namespaces' versions are
        self.rules = ProducerRules(settings)
        self.conversations = ConversationRules(self.rules)
        self.steps = SyncSteps(client, self.store, self.clock, self.replicas)

    def run(self, rule: Step[T]) -> T:
        return self.steps.run(rule)

    def memory_version(self, namespace: str) -> int:
        """The namespace's memory version now (bumped by every write)."""
        return self.run(self.rules.memory_version(namespace))

    def enqueue(self, request: RetrievalRequest | dict[str, Any]) -> JobHandle:
        """Validate and enqueue; raises InvalidRequest naming the bad field."""
        return self.run(self.rules.enqueue(request))

    def enqueue_many(self, requests: Sequence[RetrievalRequest | dict[str, Any]]) -> list[JobHandle | Exception]:
        """Enqueue several requests side by side: each round trip of ``enqueue`` made once for all of them
        (``SyncSteps.run_together``). Each request's handle, or the error that refused it (an
        ``InvalidRequest`` naming the field), in order."""
        return self.steps.run_together([self.rules.enqueue(request) for request in requests])

    def enqueue_carried(self, requests: Sequence[RetrievalRequest | dict[str, Any]]
                        ) -> list[JobHandle | Exception | None]:
        """A batch's lines, ``service.batch_lines_per_job`` a carrier (``ferret.producer.carried``): each
        request's handle, the error that refused it, or None for one to enqueue the usual way."""
        return self.run(enqueue_carried(self.rules, list(requests), self.settings.service.batch_lines_per_job))

    def results_of(self, jobs: Sequence[JobHandle]) -> list[RetrievalResult | Exception | None]:
        """The results stored for ``jobs`` now (None: not yet), read in one round trip; a result that is
        not the handle's own, or not a result, is its ``BadResult``."""
        return self.steps.run_together([self.rules.owned_result(job) for job in jobs])

    def prefetch(self, namespace: str, conversation: str, query: str, **fields: Any) -> JobHandle:
        """Enqueue a prefetch for ``conversation``; older ones still queued are superseded
        (``ferret.producer.conversations``)."""
        return self.run(self.conversations.prefetch(namespace, conversation, query, **fields))

    def context_for(self, namespace: str, conversation: str) -> ConversationContext | None:
        """The conversation's freshest finished prefetch, its age and whether memories changed since."""
        return self.run(self.conversations.context_for(namespace, conversation))

    def result(self, job: JobHandle | str) -> RetrievalResult | None:
        """The final result stored for ``job`` now, or None when there is none yet (it is never waited for)."""
        return self.run(self.rules.result(job))

    def status(self, job: JobHandle | str) -> JobState:
        """Ferret's final status and RQ's state of the job, as two fields."""
        return self.run(self.rules.status(job))

    def trace(self, job: JobHandle | str) -> dict[str, Any]:
        """The job's span trace (a dict of spans, the waterfall ``ferret trace`` draws); ``JobNotFound`` when
        none is stored."""
        return self.run(self.rules.trace(job))

    def workers_serving(self, queue: str) -> int:
        """How many workers listen on ``queue`` now (0: a job there waits for one)."""
        return workers_serving(self.client, queue)

    def wait(self, job: JobHandle | str, timeout: float = 30.0) -> RetrievalResult:
        """The final result, blocking (no polling) until it exists; ResultTimeout
        (a TimeoutError, carrying RQ's state of the job) once ``timeout`` passes.

        Redis out of reach (past the client's own retries) is waited out within
        ``timeout``: said once when it starts and once when it ends; still out of
        reach when the time is up, ``RedisUnreachable``."""
        return drive(waiting(self.rules, job, timeout, self.settings.redis.failover_check_seconds), self._do,
                     AWAY_ERRORS)

    def _do(self, action: Action) -> Any:
        if isinstance(action, AwaitResult):
            return self.results.wait(action.job_id, action.seconds)
        if isinstance(action, RunRule):
            return self.run(action.step)
        time.sleep(action.seconds)
        return None
