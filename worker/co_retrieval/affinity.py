"""Co-retrieval weights for the ``local`` backend, and the score bonus they lend.

Weights live in Redis, one hash per memory (partner id -> weight), symmetric,
grown by a strengthening amount and capped at 1.0 like Nous's edge strengths.
At search time the best ``seeds`` hits lend a bonus to the hits they are
linked with:

    bonus(h) = max over seeds s != h of weight(s, h) * score(s)
    score(h) = min(1, score(h) + affinity_weight * bonus(h))

so a memory that has often come back together with today's best match moves
up, by at most ``affinity_weight`` x the seed's score. Only hits already found
are re-scored (no new memories are pulled in); ``original_score`` keeps the
lexical score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import redis

from ferret import keys
from ferret.errors import BackendUnavailable
from ferret.records import Filters, Hit
from ferret.redis_plumbing.scripts import registered
from ferret.worker.backends.base import retrievers_of, widens
from ferret.worker.backends.change_log import as_text
from ferret.worker.co_retrieval.groups import pairs

# KEYS: the affinity hashes of the pairs' ends, two per pair; ARGV[1]: amount;
# ARGV[2..]: the partner ids, the other end for each key. Capped at 1.0.
_STRENGTHEN = """
local amount = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local partner = ARGV[i + 1]
  local now = tonumber(redis.call('HGET', key, partner) or '0')
  redis.call('HSET', key, partner, tostring(math.min(1.0, now + amount)))
end
return #KEYS / 2
"""


class Affinity(Protocol):
    def weights(self, ids: Sequence[str]) -> dict[str, dict[str, float]]: ...

    def strengthen(self, groups: Iterable[Sequence[str]], amount: float) -> int: ...


class RedisAffinity:
    """One namespace's co-retrieval weights in Redis."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    def strengthen(self, groups: Iterable[Sequence[str]], amount: float) -> int:
        """Grow the weight of every pair within each group; the number of pairs."""
        found = sorted(pairs(groups))
        if not found:
            return 0
        ends: list[str] = []
        partners: list[Any] = []
        for a, b in found:
            ends += [keys.affinity(self.namespace, a), keys.affinity(self.namespace, b)]
            partners += [b, a]
        return int(registered(self.client, _STRENGTHEN)(keys=ends, args=[amount, *partners]))

    def weights(self, ids: Sequence[str]) -> dict[str, dict[str, float]]:
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for memory_id in ids:
                    pipe.hgetall(keys.affinity(self.namespace, memory_id))
                rows = pipe.execute()
        except redis.RedisError as exc:
            raise BackendUnavailable("local", f"affinity weights unreachable: {exc}") from exc
        return {memory_id: {as_text(k): float(v) for k, v in row.items()}
                for memory_id, row in zip(ids, rows, strict=True)}


class InMemoryAffinity:
    """The same weights in a dict (benchmarks and tests)."""

    def __init__(self) -> None:
        self.table: dict[str, dict[str, float]] = {}

    def strengthen(self, groups: Iterable[Sequence[str]], amount: float) -> int:
        found = pairs(groups)
        for a, b in found:
            for one, other in ((a, b), (b, a)):
                row = self.table.setdefault(one, {})
                row[other] = min(1.0, row.get(other, 0.0) + amount)
        return len(found)

    def weights(self, ids: Sequence[str]) -> dict[str, dict[str, float]]:
        return {memory_id: dict(self.table.get(memory_id, {})) for memory_id in ids}


def with_affinity(hits: Sequence[Hit], weights: dict[str, dict[str, float]], weight: float,
                  seeds: int) -> list[Hit]:
    """Hits re-scored with the bonus their links to the top ``seeds`` lend; best first."""
    top = hits[:seeds]
    rescored = []
    for hit in hits:
        bonus = max((weights.get(s.id, {}).get(hit.id, 0.0) * s.score for s in top if s.id != hit.id),
                    default=0.0)
        if bonus > 0:
            hit = replace(hit, score=min(1.0, hit.score + weight * bonus))
        rescored.append(hit)
    return sorted(rescored, key=lambda h: (-h.score, h.id))


class AffinityBackend:
    """Wraps a backend: its hits get the co-retrieval bonus (one Redis round trip per search)."""

    def __init__(self, inner: Any, affinity: Affinity, weight: float, seeds: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.retrievers = retrievers_of(inner)
        self.widens = widens(inner)
        self.affinity = affinity
        self.weight = weight
        self.seeds = seeds

    def search(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        hits = self.inner.search(query, limit, filters, timeout)
        if not hits or self.weight <= 0:
            return hits
        weights = self.affinity.weights([h.id for h in hits[: self.seeds]])
        return with_affinity(hits, weights, self.weight, self.seeds)

    def linked(self, seeds: Sequence[Hit], limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        return list(self.inner.linked(seeds, limit, filters, timeout))

    def similar(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        return list(self.inner.similar(query, limit, filters, timeout))

    def widened(self, query: str, limit: int, filters: Filters, timeout: float | None = None) -> list[Hit]:
        return list(self.inner.widened(query, limit, filters, timeout))

    def classify(self, query: str, timeout: float | None = None) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self.inner.classify(query, timeout)
        return result

    def close(self) -> None:
        self.inner.close()
