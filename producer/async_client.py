"""The asyncio producer: ``ferret.producer.rules`` run with ``redis.asyncio``.

The same rules as the blocking ``Producer`` (ids, claims, coalescing,
deadlines, supersedes: ``ferret.producer.rules``, ``ferret.producer.conversations``), so
the two clients enqueue the same jobs. Waiting never blocks the loop and
holds no connection per waiter: waiters share one subscriber connection
(``ferret.producer.done_hub``) and read the result when it is announced, or at
each slice of their wait; a job a failover lost is enqueued again, as the
blocking client does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, TypeVar

import redis.asyncio as aredis

from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.producer.conversations import ConversationContext, ConversationRules
from ferret.producer.done_hub import DoneHub
from ferret.producer.rules import JobHandle, JobState, ProducerRules, job_id_of
from ferret.producer.waiting import AWAY_ERRORS, Action, AwaitResult, RunRule, waiting
from ferret.results import WAIT_SLICE_SECONDS
from ferret.settings import Settings
from ferret.steps import Step
from ferret.steps_async import AsyncRedisClock, AsyncReplicaWait, AsyncSteps, drive_async

T = TypeVar("T")
logger = logging.getLogger(__name__)


class AsyncProducer:
    def __init__(self, client: aredis.Redis, settings: Settings, store: aredis.Redis | None = None) -> None:
        """``store``: the memory store's client when it is not ``client`` (``ferret.redis_plumbing.store_conn``)."""
        self.client = client
        self.store = store if store is not None else client
        self.settings = settings
        self.clock = AsyncRedisClock(client)
        self.rules = ProducerRules(settings)
        self.conversations = ConversationRules(self.rules)
        self.steps = AsyncSteps(client, self.store, self.clock,
                                AsyncReplicaWait(client, settings.redis.min_replicas_acked,
                                                 settings.redis.replica_ack_timeout_ms))
        self.hub = DoneHub(client)

    async def run(self, rule: Step[T]) -> T:
        return await self.steps.run(rule)

    async def memory_version(self, namespace: str) -> int:
        return await self.run(self.rules.memory_version(namespace))

    async def enqueue(self, request: RetrievalRequest | dict[str, Any]) -> JobHandle:
        """Validate and enqueue; raises InvalidRequest naming the bad field."""
        return await self.run(self.rules.enqueue(request))

    async def prefetch(self, namespace: str, conversation: str, query: str, **fields: Any) -> JobHandle:
        """Enqueue a prefetch for ``conversation``; older ones still queued are superseded."""
        return await self.run(self.conversations.prefetch(namespace, conversation, query, **fields))

    async def context_for(self, namespace: str, conversation: str) -> ConversationContext | None:
        """The conversation's freshest finished prefetch, its age and whether memories changed since (None: none)."""
        return await self.run(self.conversations.context_for(namespace, conversation))

    async def result(self, job: JobHandle | str) -> RetrievalResult | None:
        """The final result stored for ``job`` now, or None when there is none yet (it is never waited for)."""
        return await self.run(self.rules.result(job))

    async def status(self, job: JobHandle | str) -> JobState:
        """Ferret's final status and RQ's state of the job, as two fields."""
        return await self.run(self.rules.status(job))

    async def trace(self, job: JobHandle | str) -> dict[str, Any]:
        """The job's span trace (a dict of spans, the waterfall ``ferret trace`` draws); ``JobNotFound`` when
        none is stored."""
        return await self.run(self.rules.trace(job))

    async def wait(self, job: JobHandle | str, timeout: float = 30.0) -> RetrievalResult:
        """The final result, awaited until it exists; ``ResultTimeout`` once ``timeout`` passes.
        Redis out of reach is waited out within ``timeout`` (``RedisUnreachable`` if it still is)."""
        policy = waiting(self.rules, job, timeout, self.settings.redis.failover_check_seconds)
        async with self.hub.watch(job_id_of(job)) as announced:
            return await drive_async(policy, lambda action: self._do(action, announced), AWAY_ERRORS)

    async def _do(self, action: Action, announced: asyncio.Event) -> Any:
        if isinstance(action, AwaitResult):
            return await self._await_result(action, announced)
        if isinstance(action, RunRule):
            return await self.run(action.step)
        await asyncio.sleep(action.seconds)
        return None

    async def _await_result(self, action: AwaitResult, announced: asyncio.Event) -> RetrievalResult | None:
        """The result, read when announced (``DoneHub``) or at each slice of ``action.seconds``."""
        loop = asyncio.get_running_loop()
        until = loop.time() + action.seconds
        while True:
            announced.clear()
            found = await self.run(self.rules.result(action.job_id))
            left = until - loop.time()
            if found is not None or left <= 0:
                return found
            await _woken(announced, min(left, WAIT_SLICE_SECONDS))

    async def close(self) -> None:
        await self.hub.close()
        await self.client.aclose()
        if self.store is not self.client:
            await self.store.aclose()


async def _woken(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` was set within ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):  # no task per wait, unlike wait_for
            await event.wait()
        return True
    return False
