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

import redis
import redis.asyncio as aredis

from ferret.contract import RetrievalRequest, RetrievalResult
from ferret.producer.conversations import ConversationContext, ConversationRules
from ferret.producer.done_hub import DoneHub
from ferret.producer.rules import JobHandle, JobState, ProducerRules, RedisAway, check_owner, job_id_of
from ferret.results import WAIT_SLICE_SECONDS
from ferret.settings import Settings
from ferret.steps import Step
from ferret.steps_async import AsyncRedisClock, AsyncReplicaWait, AsyncSteps

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
        return await self.run(self.conversations.prefetch(namespace, conversation, query, **fields))

    async def context_for(self, namespace: str, conversation: str) -> ConversationContext | None:
        return await self.run(self.conversations.context_for(namespace, conversation))

    async def result(self, job: JobHandle | str) -> RetrievalResult | None:
        return await self.run(self.rules.result(job))

    async def status(self, job: JobHandle | str) -> JobState:
        return await self.run(self.rules.status(job))

    async def trace(self, job: JobHandle | str) -> dict[str, Any]:
        return await self.run(self.rules.trace(job))

    async def wait(self, job: JobHandle | str, timeout: float) -> RetrievalResult:
        """The final result, awaited until it exists; ``ResultTimeout`` once ``timeout`` passes.
        Redis out of reach is waited out within ``timeout`` (``RedisUnreachable`` if it still is)."""
        job_id = job_id_of(job)
        check = self.settings.redis.failover_check_seconds
        watch = isinstance(job, JobHandle) and job.request is not None and check > 0
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        away = RedisAway(job_id)
        found: RetrievalResult | None = None
        async with self.hub.watch(job_id) as announced:
            while True:
                try:
                    announced.clear()
                    found = await self.run(self.rules.result(job_id))
                    left = until - loop.time()
                    if found is None and left > 0:
                        woken = await _woken(announced, min(left, check if watch else WAIT_SLICE_SECONDS))
                        if not woken and watch and left > check:
                            assert isinstance(job, JobHandle)
                            if await self.run(self.rules.lost(job)):
                                await self.run(self.rules.enqueue_again(job))
                except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                    away.failed(exc)
                    await asyncio.sleep(min(1.0, max(0.0, until - loop.time())))
                else:
                    away.answered()
                if found is not None or until - loop.time() <= 0:
                    break
        if found is None and (unreachable := away.unreachable(timeout)) is not None:
            raise unreachable
        if found is None:
            raise await self.run(self.rules.timed_out(job, timeout))
        if isinstance(job, JobHandle):
            check_owner(found, job)
        return found

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
