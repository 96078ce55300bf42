"""The identity of a local memory store: a random token it keeps (``keys.store_identity``), made by the
first worker that asks. What tells two stores apart when their namespaces have the same names: the queue's
binding to one store (``ferret.worker.core.store_binding``), the indexes workers share on a host
(``index_sharing``)."""

from __future__ import annotations

import secrets

import redis

from ferret import keys
from ferret.steps import text


def local_store_identity(store: redis.Redis) -> str:
    store.set(keys.store_identity(), "local:" + secrets.token_hex(12), nx=True)
    return (text(store.get(keys.store_identity())) or "")[:100]
