"""The retrieval cache (seed 002, moved to Redis and shared by all workers).

Key: the normalised query (lowercase, whitespace collapsed, trailing
punctuation stripped), the namespace, filters, options, the backend kind,
the memory store's version, and a fingerprint of everything else that
decides an answer (the pipeline, backend, re-rank, co-retrieval and limit
settings, and this code's version): a worker restarted with other settings,
or a new release, never serves an answer the old ones made. A request can
skip the cache (``options.cache: false``). A change to the memories bumps the version, so
stale entries are simply never asked for again and expire on their TTL: no
explicit clear (the seed's open problem). Only ``ok`` results are cached.
The same key serves to coalesce identical prefetch requests in flight.

What is cached: the results, the context and the run's stats less what
belongs to that one run (its backend calls and stage timings), packed
(``ferret.packed``). An entry that does not read as one is a miss. A result
whose asked-for re-rank fell back is not cached: the next ask may get it.
"""

from __future__ import annotations

import hashlib
import json

import orjson

from ferret import __version__, keys
from ferret.contract import ResultItem, RetrievalRequest
from ferret.packed import MAX_VALUE_BYTES, pack, unpack
from ferret.settings import Settings
from ferret.stats import JobStats
from ferret.text import cache_form


def normalise(query: str) -> str:
    return cache_form(query)


# Bump when what a cached entry means changes without a settings change.
CACHE_FORMAT = 2


def answer_fingerprint(settings: Settings) -> str:
    """What decides an answer besides the request and the memories (secrets left out)."""
    material = {
        "pipeline": settings.pipeline.model_dump(mode="json"),
        # (the local index's memory and build settings never change an answer)
        "backend": settings.backend.model_dump(mode="json", exclude={"nous": {"api_key"}, "local": True}),
        "rerank": settings.rerank.model_dump(mode="json", exclude={"api_key"}),
        "agent": settings.agent.model_dump(mode="json", exclude={"api_key"}),
        "semantic": settings.semantic.model_dump(mode="json", exclude={"api_key", "timeout_seconds", "batch_size",
                                                                       "model_dir"}),
        "co_retrieval": settings.co_retrieval.model_dump(mode="json"),
        "limits": settings.limits.model_dump(mode="json"),
        "code": [__version__, CACHE_FORMAT],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def cache_key(request: RetrievalRequest, backend: str, memory_version: int, fingerprint: str = "") -> str:
    material = json.dumps([
        normalise(request.query), request.namespace,
        request.filters.model_dump(mode="json", exclude_none=True),
        request.options.model_dump(mode="json", exclude=set() if request.options.agent else {"agent"}),
        backend, memory_version, fingerprint,
        *([[turn.model_dump(mode="json") for turn in request.history]] if request.history else []),
    ], sort_keys=True, separators=(",", ":"))
    return keys.cached(request.namespace, hashlib.sha256(material.encode()).hexdigest()[:40])


def inflight_key(cache: str) -> str:
    return cache.replace(":cache:", ":inflight:", 1)


CACHEABLE_RERANK = ("off", "ok", "too_few", "disabled")
_PER_RUN = {"backend_calls", "stage_ms", "index", "index_changes", "index_evictions"}


def cacheable(status: str, stats: JobStats) -> bool:
    agent_ok = stats.agent is None or stats.agent.get("outcome") in ("ok", "clarification", "disabled")
    return status == "ok" and agent_ok and (stats.rerank is None or stats.rerank in CACHEABLE_RERANK)


def cache_entry(results: list[ResultItem], context: str, stats: JobStats) -> bytes:
    """The stored form of a cacheable answer: the models' fields dumped by orjson (as ``result_json`` dumps a
    result: 11 against 56 us for ten items), or by the standard library what orjson refuses (a lone
    surrogate); either reads back as the same answer (``read_entry``). A score that is not a number is written
    as null, as in the stored result, and such an entry reads as a miss."""
    entry = {"results": [item.__dict__ for item in results], "context": context,
             "stats": {name: value for name, value in stats.__dict__.items()
                       if value is not None and name not in _PER_RUN}}
    try:
        return pack(orjson.dumps(entry))
    except orjson.JSONEncodeError:
        entry = {"results": [item.model_dump(mode="json") for item in results], "context": context,
                 "stats": stats.model_dump(mode="json", exclude_none=True, exclude=_PER_RUN)}
        return pack(json.dumps(entry).encode())


def read_entry(raw: bytes | str, looked_up_ms: float) -> tuple[list[ResultItem], str, JobStats]:
    """A cached answer: its results, context, and stats marked as a hit; a
    ``ValueError`` (or ``KeyError``, ``TypeError``) when what is stored is not one."""
    data = json.loads(unpack(raw, MAX_VALUE_BYTES))
    stats = JobStats.model_validate({**data["stats"], "cache_hit": True, "stage_ms": {"cache": looked_up_ms}})
    return [ResultItem.model_validate(item) for item in data["results"]], data["context"], stats
