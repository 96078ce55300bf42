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

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

from ferret.contract import RetrievalResult, parse_request
from ferret.embedded_redis import redis_url_for
from ferret.errors import InvalidMemory
from ferret.ingest import parse_memory
from ferret.records import Memory
from ferret.redis_conn import client_for
from ferret.settings import Settings, load_settings
from ferret.store_conn import store_client
from producer.client import JobHandle, JobState, Producer
from producer.conversations import ConversationContext

if TYPE_CHECKING:
    from worker.backends.writers import MemoryWriter

logger = logging.getLogger(__name__)

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


class Client:
    """Enqueue, wait, read results and traces, write and delete memories.

    ``Client`` holds one Redis connection pool; close it (or use ``with``)."""

    def __init__(self, settings: Settings, client: redis.Redis) -> None:
        self.settings = settings
        self.redis = client
        self.producer = Producer(client, settings)

    # -- requests ---------------------------------------------------------------------------
    def enqueue(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> JobHandle:
        """Validate and enqueue a request (a dict, or its fields as keywords); its handle."""
        return self.producer.enqueue({**(request or {}), **fields})

    def wait(self, job: JobHandle | str, timeout: float = 30.0) -> RetrievalResult:
        """The job's final result; ``ResultTimeout`` past ``timeout`` seconds."""
        return self.producer.wait(job, timeout)

    def query(self, query: str, namespace: str, timeout: float = 30.0, **fields: Any) -> RetrievalResult:
        """Enqueue and wait, in one call."""
        return self.wait(self.enqueue(query=query, namespace=namespace, **fields), timeout)

    def prefetch(self, namespace: str, conversation: str, query: str, **fields: Any) -> JobHandle:
        """Prefetch context for a conversation's next turn; an older prefetch of it still queued
        is superseded (ends ``expired``, ``stats.superseded_by``, never runs)."""
        return self.producer.prefetch(namespace, conversation, query, **fields)

    def context_for(self, namespace: str, conversation: str) -> ConversationContext | None:
        """The conversation's freshest finished prefetch (``.context``, ``.age_seconds``, ``.stale``:
        memories were written since it was enqueued), or None."""
        return self.producer.context_for(namespace, conversation)

    def result(self, job: JobHandle | str) -> RetrievalResult | None:
        """The final result if there is one yet, else None."""
        return self.producer.result(job)

    def status(self, job: JobHandle | str) -> JobState:
        return self.producer.status(job)

    def trace(self, job: JobHandle | str) -> dict[str, Any]:
        return self.producer.trace(job)

    # -- memories ---------------------------------------------------------------------------
    def remember(self, namespace: str, memories: Iterable[MemoryLike]) -> int:
        """Write (or replace, by id) memories in ``namespace``, as ``ferret ingest`` does; how many."""
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
        from worker.backends.writers import writer_for

        checked = parse_request({"query": "x", "namespace": namespace}, self.settings.limits).namespace
        writer = writer_for(self.settings, store_client(self.settings, self.redis), checked)
        try:
            yield writer
        finally:
            getattr(writer, "close", lambda: None)()

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(settings: Settings | None = None, *, url: str | None = None,
            config: str | Path | None = None) -> Client:
    """A client with the CLI's settings (``settings``, else the environment and ``config``);
    ``url`` overrides ``redis.url``; with none, the shared embedded Redis."""
    if settings is None:
        settings = load_settings(config)
    if url is not None:
        settings = settings.model_copy(update={"redis": settings.redis.model_copy(update={"url": url})})
    url_now = redis_url_for(settings, lambda shared: logger.info("started the embedded Redis at %s (data in %s)",
                                                                  shared.url, shared.directory))
    return Client(settings, client_for(url_now))
