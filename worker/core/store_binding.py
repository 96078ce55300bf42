"""Every worker of a queue reads the same memory store, or does not start.

Two workers on one queue, one started without the store setting the other has (``backend.local.store_url``,
or another Nous server), would each answer ``ok``: one from the memories, the other from an empty or
different store; half the answers silently empty. So the store has an identity (a local store: a random
token it keeps, ``keys.store_identity``; Nous: its servers' URLs), and the queue Redis is bound to one
identity (``keys.store_binding``), with whether that store holds any memories. The store that holds memories
wins, whatever the start order: the first worker binds the queue; a later worker whose store is another
refuses to start, saying which, unless the bound store holds no memories and its own does (the first worker
was the one started without the store setting): then the queue is bound to the later worker's store, and the
workers of the empty one stop at their next maintenance pass, saying why. Each refusal is counted in the queue
Redis (``keys.store_mismatches``), which every worker exports as ``ferret_store_mismatches_total``. The
binding lasts while workers serve the queue: each renews it at its maintenance pass (every
``service.reaper_interval_seconds``; a worker that finds it bound to another store stops), and it lapses
``binding_seconds`` after the last one stops. Moving a queue to another store: stop its workers, start them
on the new one a minute later (or delete ``ferret:store-binding`` at once)."""

from __future__ import annotations

import hashlib
import json
import logging

import redis
from redis.cluster import RedisCluster

from ferret import keys
from ferret.errors import ConfigError
from ferret.redis_plumbing.redis_conn import redacted
from ferret.settings import Settings
from ferret.steps import text
from ferret.worker.backends.store_identity import local_store_identity

logger = logging.getLogger(__name__)
HOLDS, EMPTY = "memories", "empty"  # what the binding says of its store, after the identity and a space
_RENEW = """
local bound = redis.call('GET', KEYS[1])
if bound and string.match(bound, '^[^ ]+') ~= ARGV[1] then return bound end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return false
"""


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


def holds_memories(settings: Settings, store: redis.Redis) -> bool:
    """Whether the store holds any namespace's memories (a Nous server is taken to: it is not looked into)."""
    if settings.backend.kind == "nous":
        return True
    if not isinstance(store, RedisCluster):
        return _any_memories(store)
    for node in store.get_primaries():  # node by node: a shard that is down does not hide the others
        try:
            if _any_memories(store.get_redis_connection(node)):
                return True
        except redis.RedisError:
            continue
    return False


def _any_memories(client: redis.Redis) -> bool:
    return next(iter(client.scan_iter(match=keys.memories("*"), count=1000)), None) is not None


def _binding(identity: str, holds: bool) -> str:
    return f"{identity} {HOLDS if holds else EMPTY}"


def _parsed(bound: str) -> tuple[str, bool]:
    """A binding's identity and whether its store holds memories (a binding that does not say: it does)."""
    identity, _, what = bound.partition(" ")
    return identity, what != EMPTY


def renew_binding(settings: Settings, queue: redis.Redis, identity: str, holds: bool = True) -> None:
    """A serving worker keeps the binding alive (its maintenance pass); ConfigError when the queue is bound
    to another store now (a worker whose store holds the memories took it: this one must stop)."""
    bound = queue.eval(_RENEW, 1, keys.store_binding(), identity, _binding(identity, holds),
                       binding_seconds(settings))
    if bound:
        other = text(bound) or ""
        raise ConfigError(f"this worker's memory store (identity {identity}) holds no memories, and the queue is "
                          f"bound now to a store that does (identity {_parsed(other)[0][:100]}), which another "
                          "worker brought: this worker stops. Start it with the same backend settings "
                          "(backend.local.store_url, backend.nous.*) as the others")


def check_store_binding(settings: Settings, queue: redis.Redis, store: redis.Redis) -> tuple[str, bool]:
    """Bind the queue to this worker's store, or check it is the one bound (or take the binding from a store
    that holds no memories, when this one does); ConfigError when it is another. This worker's store's
    identity, and whether it holds memories."""
    mine = store_identity(settings, store)
    holds = holds_memories(settings, store)
    queue.set(keys.store_binding(), _binding(mine, holds), nx=True, ex=binding_seconds(settings))
    bound_text = text(queue.get(keys.store_binding())) or ""
    bound, bound_holds = _parsed(bound_text)
    if bound != mine and holds and not bound_holds:
        queue.set(keys.store_binding(), _binding(mine, holds), ex=binding_seconds(settings))
        logger.warning("the queue was bound to a memory store that holds no memories (identity %s), this worker's "
                       "holds them (identity %s): the queue is bound to this one now; the workers of the empty "
                       "store stop at their next maintenance pass", bound[:100], mine)
        return mine, holds
    if bound != mine:
        queue.incr(keys.store_mismatches())
        if settings.backend.kind == "nous":
            where = "its Nous servers"
        else:
            url = settings.backend.local.store_url
            where = redacted(url) if url else "the queue Redis itself"
        raise ConfigError(
            f"this worker's memory store ({where}, identity {mine}) is not "
            f"the one the other workers of this queue read (identity {bound[:100]}): its answers would come "
            "from other memories. Start it with the same backend settings (backend.local.store_url, "
            "backend.nous.*) as the others; to move the queue to another store on purpose, stop every worker "
            f"first (the binding lapses {binding_seconds(settings)} s after the last one; or delete "
            f"{keys.store_binding()})")
    return mine, holds
