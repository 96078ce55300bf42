"""``ferret.connect()``: Ferret from Python in one line.

The client reads the same settings as the command line (``FERRET_*``
environment variables, the YAML file named by ``FERRET_CONFIG`` or
``config``), and with no ``redis.url`` it uses the shared embedded Redis the
CLI uses (started when it is not running). It offers what the CLI does:
enqueue a request and wait for its result (``Producer``), and write or
delete memories with the validation of ``ferret ingest`` (errors name the
memory's position and field).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from ferret.contract import RetrievalRequest, RetrievalResult, parse_request
from ferret.errors import InvalidMemory, RedisUnreachable
from ferret.ingest import parse_memory
from ferret.producer.async_client import AsyncProducer
from ferret.producer.client import JobHandle, Producer
from ferret.records import Memory
from ferret.redis_plumbing.async_redis import async_client_for
from ferret.redis_plumbing.embedded_redis import redis_url_for
from ferret.redis_plumbing.redis_conn import REDIS_AWAY, client_for, reason
from ferret.redis_plumbing.store_conn import separate_store_url, store_client
from ferret.settings import Settings, load_settings
from ferret.steps import Step

if TYPE_CHECKING:
    from ferret.worker.backends.writers import MemoryWriter

logger = logging.getLogger(__name__)
REDIS_AWAY_OR_SOCKET: tuple[type[BaseException], ...] = (*REDIS_AWAY, OSError)  # the asyncio client's
T = TypeVar("T")

MemoryLike = Memory | Mapping[str, Any] | str



def as_memories(items: Iterable[MemoryLike]) -> list[Memory]:
    """Memories from ``Memory`` objects, dicts or JSON lines, checked as ``ferret ingest``
    checks a file's lines; the first bad one raises ``InvalidMemory`` naming its position and field."""
    memories = []
    for number, item in enumerate(items):
        if isinstance(item, Memory):
            text = item.model_dump_json()
        elif isinstance(item, str):
            text = item
        elif isinstance(item, Mapping):
            try:
                text = json.dumps(dict(item))
            except (TypeError, ValueError) as exc:
                raise InvalidMemory(f"memories[{number}]", f"is not JSON data ({exc})") from None
        else:
            raise InvalidMemory(f"memories[{number}]", f"is a {type(item).__name__}, not a Memory, a dict or "
                                                       "a JSON line")
        try:
            memories.append(parse_memory(text))
        except InvalidMemory as exc:
            raise InvalidMemory(f"memories[{number}].{exc.field}", exc.message) from None
    return memories


class Client(Producer):
    """Enqueue, wait, read results and traces (``Producer``'s own methods), write and delete memories.

    ``Client`` holds one Redis connection pool; close it (or use ``with``)."""

    def __init__(self, settings: Settings, client: redis.Redis) -> None:
        super().__init__(client, settings)
        self.redis = client

    def run(self, rule: Step[T]) -> T:
        """A rule run through Redis; Redis out of reach (past the client's retries) is ``RedisUnreachable``."""
        try:
            return super().run(rule)
        except REDIS_AWAY as exc:
            raise RedisUnreachable(f"Redis did not answer: {reason(exc)}") from exc

    # -- requests ---------------------------------------------------------------------------
    def enqueue(self, request: Mapping[str, Any] | RetrievalRequest | None = None, /, **fields: Any) -> JobHandle:
        """Validate and enqueue a request (a dict, or its fields as keywords); its handle."""
        if isinstance(request, RetrievalRequest) and not fields:
            return super().enqueue(request)
        given = request.model_dump() if isinstance(request, RetrievalRequest) else dict(request or {})
        return super().enqueue({**given, **fields})

    def query(self, query: str, namespace: str, timeout: float = 30.0, **fields: Any) -> RetrievalResult:
        """Enqueue and wait, in one call."""
        return self.wait(self.enqueue(query=query, namespace=namespace, **fields), timeout)

    # -- memories ---------------------------------------------------------------------------
    def remember(self, namespace: str, memories: Iterable[MemoryLike]) -> int:
        """Write (or replace, by id) memories in ``namespace``, as ``ferret ingest`` does; how many.
        Checked first: the first bad one raises ``InvalidMemory`` naming ``memories[i].field``;
        the store out of reach raises ``RedisUnreachable``."""
        checked = as_memories(memories)
        with self._writer(namespace) as writer:
            return writer.upsert(checked)

    def forget(self, namespace: str, ids: Iterable[str]) -> int:
        """Delete memories by id; how many there were."""
        wanted = [str(memory_id) for memory_id in ids]
        with self._writer(namespace) as writer:
            return writer.delete(wanted)

    @contextmanager
    def _writer(self, namespace: str) -> Iterator[MemoryWriter]:
        """The writer ``ferret ingest`` uses (imported here: producers that only ask never load it)."""
        from ferret.worker.backends.writers import writer_for

        checked = checked_namespace(self.settings, namespace)
        try:
            writer = writer_for(self.settings, store_client(self.settings, self.redis), checked)
            try:
                yield writer
            finally:
                getattr(writer, "close", lambda: None)()
        except REDIS_AWAY as exc:
            raise RedisUnreachable(f"the memory store did not answer: {exc}") from exc

    def close(self) -> None:
        """Close the client's Redis connections."""
        self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(AsyncProducer):
    """``Client``'s methods as coroutines, on ``redis.asyncio``: waiting never blocks the loop,
    and a thousand waiters share one connection (``ferret.producer.async_client``).

    ``remember`` sends the local store's write script from the loop when that is all a write is
    (``plain_local_writes``); otherwise, and ``forget`` always, it runs ``ferret ingest``'s writer (blocking
    code: embeddings, replica waits, Nous over HTTP) in a worker thread, one call at a time per call made."""

    async def run(self, rule: Step[T]) -> T:
        """A rule run through Redis; Redis out of reach (past the client's retries) is ``RedisUnreachable``."""
        try:
            return await super().run(rule)
        except REDIS_AWAY_OR_SOCKET as exc:
            raise RedisUnreachable(f"Redis did not answer: {exc}") from exc

    def __init__(self, settings: Settings, url: str) -> None:
        store_url = separate_store_url(settings)
        super().__init__(async_client_for(url), settings, async_client_for(store_url) if store_url else None)
        self.url = url
        self._sync: Client | None = None

    async def enqueue(self, request: Mapping[str, Any] | RetrievalRequest | None = None, /,
                      **fields: Any) -> JobHandle:
        if isinstance(request, RetrievalRequest) and not fields:
            return await super().enqueue(request)
        given = request.model_dump() if isinstance(request, RetrievalRequest) else dict(request or {})
        return await super().enqueue({**given, **fields})

    async def query(self, query: str, namespace: str, timeout: float = 30.0, **fields: Any) -> RetrievalResult:
        """Enqueue and wait, in one call."""
        return await self.wait(await self.enqueue(query=query, namespace=namespace, **fields), timeout)

    async def remember(self, namespace: str, memories: Iterable[MemoryLike]) -> int:
        """Write (or replace, by id) memories in ``namespace``; how many. The first bad one raises ``InvalidMemory``
        naming ``memories[i].field``."""
        checked = as_memories(memories)  # checked here, on the loop: a bad memory fails at once
        if plain_local_writes(self.settings):  # the store's write script alone: sent from the loop, no thread
            from ferret.worker.backends.local import upsert_step

            length = self.settings.backend.local.change_log_length
            return await self.run(upsert_step(checked_namespace(self.settings, namespace), checked, length))
        return await asyncio.to_thread(self._blocking().remember, namespace, checked)

    async def forget(self, namespace: str, ids: Iterable[str]) -> int:
        """Delete memories by id; how many there were."""
        return await asyncio.to_thread(self._blocking().forget, namespace, list(ids))

    def _blocking(self) -> Client:
        if self._sync is None:
            self._sync = Client(self.settings, client_for(self.url))
        return self._sync

    async def close(self) -> None:
        """Close the client's Redis connections (and its subscriber's)."""
        await super().close()
        if self._sync is not None:
            self._sync.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def checked_namespace(settings: Settings, namespace: str) -> str:
    """``namespace`` checked as a request's is (``InvalidRequest`` naming the field)."""
    return parse_request({"query": "x", "namespace": namespace}, settings.limits).namespace


def plain_local_writes(settings: Settings) -> bool:
    """A memory write is the local store's write script alone: no embedding to compute (the semantic
    retriever off), no replicas to wait for, not Nous."""
    local = settings.backend.local
    return settings.backend.kind == "local" and not settings.semantic.enabled and local.store_min_replicas_acked == 0


def _settings_and_url(settings: Settings | None, url: str | None, config: str | Path | None) -> tuple[Settings, str]:
    if settings is None:
        settings = load_settings(config)
    if url is not None:
        settings = settings.model_copy(update={"redis": settings.redis.model_copy(update={"url": url})})
    url_now = redis_url_for(settings, lambda shared: logger.info("started the embedded Redis at %s (data in %s)",
                                                                  shared.url, shared.directory))
    return settings, url_now


def connect(settings: Settings | None = None, *, url: str | None = None,
            config: str | Path | None = None) -> Client:
    """A client with the CLI's settings (``settings``, else the environment and ``config``);
    ``url`` overrides ``redis.url``; with none, the shared embedded Redis."""
    settings, url_now = _settings_and_url(settings, url, config)
    return Client(settings, client_for(url_now))


def connect_async(settings: Settings | None = None, *, url: str | None = None,
                  config: str | Path | None = None) -> AsyncClient:
    """``connect``'s settings, an ``AsyncClient`` (its connections open on first use, on the loop)."""
    settings, url_now = _settings_and_url(settings, url, config)
    return AsyncClient(settings, url_now)
