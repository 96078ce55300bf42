"""Diversity, as an option: maximal marginal relevance over the final list.

Each next place goes to the hit with the best ``lam * relevance - (1 - lam) * similarity``, where relevance
is its score over the top score and similarity its greatest word overlap (Jaccard, on the memory's title and
body) with a hit already placed. ``lam`` 1 is the ranking unchanged; lower values push near-duplicates down.
The list's members stay the same (the merge chose them, and its coverage guarantee with them); only their
order changes, so near-repeats no longer crowd the top places.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ferret.records import Hit

_WORD = re.compile(r"[^\W_]{2,}")


def _words(hit: Hit) -> frozenset[str]:
    memory = hit.memory
    text = " ".join(part for part in (memory.content_title, memory.content_body, memory.content_summary) if part)
    return frozenset(word.lower() for word in _WORD.findall(text))


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def diversify(hits: Sequence[Hit], lam: float) -> tuple[Hit, ...]:
    """``hits`` reordered by maximal marginal relevance with weight ``lam`` on relevance."""
    if len(hits) < 3 or lam >= 1.0:
        return tuple(hits)
    top = max(h.score for h in hits) or 1.0
    words = [_words(h) for h in hits]
    left = list(range(len(hits)))
    most_like = [0.0] * len(hits)  # each hit's greatest similarity to one already placed
    order: list[int] = []
    while left:
        best = max(left, key=lambda i: (lam * hits[i].score / top - (1 - lam) * most_like[i], -i))
        order.append(best)
        left.remove(best)
        for i in left:
            most_like[i] = max(most_like[i], _overlap(words[i], words[best]))
    return tuple(hits[i] for i in order)
