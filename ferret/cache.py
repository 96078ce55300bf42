"""The retrieval cache (seed 002, moved to Redis and shared by all workers).

Key: the normalised query (lowercase, whitespace collapsed, trailing
punctuation stripped), the namespace, filters, options, the backend kind and
the memory store's version. A change to the memories bumps the version, so
stale entries are simply never asked for again and expire on their TTL: no
explicit clear (the seed's open problem). Only ``ok`` results are cached.
The same key serves to coalesce identical prefetch requests in flight.
"""

from __future__ import annotations

import hashlib
import json

from ferret import keys
from ferret.contract import RetrievalRequest
from ferret.text import cache_form


def normalise(query: str) -> str:
    return cache_form(query)


def cache_key(request: RetrievalRequest, backend: str, memory_version: int) -> str:
    material = json.dumps([
        normalise(request.query), request.namespace,
        request.filters.model_dump(mode="json", exclude_none=True),
        request.options.model_dump(mode="json"), backend, memory_version,
    ], sort_keys=True, separators=(",", ":"))
    return keys.cached(request.namespace, hashlib.sha256(material.encode()).hexdigest()[:40])


def inflight_key(cache: str) -> str:
    return cache.replace(":cache:", ":inflight:", 1)
