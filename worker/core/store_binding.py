"""Every worker of a queue reads the same memory store, or does not start.

Two workers on one queue, one started without the store setting the other has (``backend.local.store_url``,
or another Nous server), would each answer ``ok``: one from the memories, the other from an empty or
different store; half the answers silently empty. So the store has an identity (a local store: a random
token it keeps, ``keys.store_identity``; Nous: its servers' URLs), and the queue Redis is bound to the first
identity a worker brings (``keys.store_binding``). A worker whose store is another refuses to start, saying
which, and the refusal is counted in the queue Redis (``keys.store_mismatches``), which every worker exports
as ``ferret_store_mismatches_total``. The binding lasts while workers serve the queue: each renews it at its
maintenance pass (every ``service.reaper_interval_seconds``), and it lapses ``binding_seconds`` after the last
one stops. Moving a queue to another store: stop its workers, start them on the new one a minute later (or
delete ``ferret:store-binding`` at once)."""

from __future__ import annotations

import hashlib
import json

import redis

from ferret import keys
from ferret.errors import ConfigError
from ferret.redis_plumbing.redis_conn import redacted
from ferret.settings import Settings
from ferret.steps import text
from ferret.worker.backends.store_identity import local_store_identity


def store_identity(settings: Settings, store: redis.Redis) -> str:
    """The identity of the store this worker reads."""
    if settings.backend.kind == "nous":
        nous = settings.backend.nous
        where = json.dumps({"default": nous.base_url, **nous.namespaces}, sort_keys=True)
        return "nous:" + hashlib.sha256(where.encode()).hexdigest()[:24]
    return local_store_identity(store)


def binding_seconds(settings: Settings) -> int:
    """How long the binding outlives the last worker that renewed it."""
    return max(60, 4 * settings.service.worker_ttl_seconds)


def renew_binding(settings: Settings, queue: redis.Redis, identity: str) -> None:
    """A serving worker keeps the binding alive (its maintenance pass)."""
    queue.set(keys.store_binding(), identity, ex=binding_seconds(settings))


def check_store_binding(settings: Settings, queue: redis.Redis, store: redis.Redis) -> str:
    """Bind the queue to this worker's store, or check it is the one bound; ConfigError when it is not."""
    mine = store_identity(settings, store)
    queue.set(keys.store_binding(), mine, nx=True, ex=binding_seconds(settings))
    bound_text = text(queue.get(keys.store_binding())) or ""
    if bound_text != mine:
        queue.incr(keys.store_mismatches())
        if settings.backend.kind == "nous":
            where = "its Nous servers"
        else:
            url = settings.backend.local.store_url
            where = redacted(url) if url else "the queue Redis itself"
        raise ConfigError(
            f"this worker's memory store ({where}, identity {mine}) is not "
            f"the one the other workers of this queue read (identity {bound_text[:100]}): its answers would come "
            "from other memories. Start it with the same backend settings (backend.local.store_url, "
            "backend.nous.*) as the others; to move the queue to another store on purpose, stop every worker "
            f"first (the binding lapses {binding_seconds(settings)} s after the last one; or delete "
            f"{keys.store_binding()})")
    return mine
