"""Stage 7, replace weak.

A hit scoring below ``floor`` gets one replacement search from its title (or
the start of its text), at most ``max_replacements`` per job. A better,
unseen candidate takes its place; otherwise the weak hit is dropped. The
best hit of each sub-query always survives (so the single best hit does, and
merge's coverage guarantee is not undone here). The search is passed in;
the stage itself does no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from worker.pipeline.records import Hit, ReplaceOutcome

logger = logging.getLogger(__name__)

REPLACEMENT_LIMIT = 3
_QUERY_WORDS = 12

Search = Callable[[str, int], Sequence[Hit]]


def replacement_query(hit: Hit) -> str | None:
    """What to search for to find a better neighbour of ``hit``."""
    title = hit.memory.content_title.strip()
    if len(title) >= 3:
        return title
    text = (hit.memory.content_summary or hit.memory.content_body).split()
    query = " ".join(text[:_QUERY_WORDS])
    return query if len(query) >= 3 else None


def _best_candidate(candidates: Sequence[Hit], weak: Hit, seen: set[str]) -> Hit | None:
    fresh = [c for c in candidates if c.id not in seen and c.score > weak.score]
    return max(fresh, key=lambda c: (c.score, c.id), default=None)


def replace_weak(
    hits: Sequence[Hit],
    search: Search,
    *,
    floor: float,
    max_replacements: int,
    has_time: Callable[[], bool] = lambda: True,
) -> ReplaceOutcome:
    """Replace or drop hits below ``floor``; ``hits`` must be ranked best first."""
    if not hits:
        return ReplaceOutcome(hits=())
    seen = {h.id for h in hits}
    protected: dict[int, str] = {}
    for hit in hits:
        protected.setdefault(hit.sub_query, hit.id)
    kept: list[Hit] = []
    attempted = successful = 0
    dropped: list[str] = []
    for hit in hits:
        if hit.score >= floor or protected[hit.sub_query] == hit.id:
            kept.append(hit)
            continue
        query = replacement_query(hit)
        if attempted >= max_replacements or query is None or not has_time():
            dropped.append(hit.id)
            continue
        attempted += 1
        try:
            candidates = search(query, REPLACEMENT_LIMIT)
        except Exception as exc:  # a failed replacement search only drops the weak hit
            logger.info("stage=replace replacement search failed: %s", exc)
            candidates = ()
        best = _best_candidate(candidates, hit, seen)
        if best is None:
            dropped.append(hit.id)
            continue
        successful += 1
        seen.add(best.id)
        kept.append(replace(best, sub_query=hit.sub_query))
    kept.sort(key=lambda h: (-h.score, h.id))
    return ReplaceOutcome(
        hits=tuple(kept), attempted=attempted, successful=successful, dropped=tuple(dropped)
    )
