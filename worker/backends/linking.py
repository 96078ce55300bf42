"""The graph retriever's scoring, shared by every backend: memories linked to
the seeds (the best lexical hits) score ``max over seeds of strength x seed
score``; the seeds themselves are left out (the lexical list has them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ferret.records import Filters, Hit, Memory
from ferret.worker.backends.filtering import matches


def neighbour_scores(seeds: Sequence[Hit], links: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Neighbour id -> its best ``strength x seed score``; seeds and non-positive links left out."""
    seed_ids = {s.id for s in seeds}
    scores: dict[str, float] = {}
    for seed in seeds:
        for other, strength in links.get(seed.id, {}).items():
            if other in seed_ids or strength <= 0:
                continue
            score = min(1.0, strength * seed.score)
            if score > scores.get(other, 0.0):
                scores[other] = score
    return scores


def linked_hits(scores: Mapping[str, float], limit: int, filters: Filters,
                read: Callable[[list[str]], Mapping[str, Memory]]) -> list[Hit]:
    """The best ``limit`` neighbours that pass the filters, read with ``read(ids)``; best first.
    A few more than ``limit`` are read, as filters may drop some."""
    ranked = sorted(scores, key=lambda i: (-scores[i], i))[: limit * 2]
    if not ranked:
        return []
    memories = read(ranked)
    hits = [Hit.of(memories[i], scores[i]) for i in ranked if i in memories and matches(memories[i], filters)]
    return hits[:limit]
