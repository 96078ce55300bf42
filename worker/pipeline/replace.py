"""Stage 7, replace weak.

A hit scoring below ``floor`` gets one replacement search, at most
``max_replacements`` per job, spent on the weakest hits first (the likeliest
noise; the first ranks are left alone). The search asks for the hit's sub-query
together with the hit's title (or the start of its text): memories about
the question *and* near the weak hit. A candidate must be unseen and score
higher than the weak hit on that same search (scores are only comparable
within one search). The best such candidate takes the weak hit's place;
otherwise the weak hit is dropped.

Guards: the best hit of each sub-query always survives (so the single best
hit does, and merge's coverage guarantee is not undone here); weak hits past
the replacement budget are kept, not dropped unexamined; and nothing is
dropped below ``min_results``. The search is passed in; the stage does no
I/O itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from ferret.records import Hit, ReplaceOutcome

logger = logging.getLogger(__name__)

CANDIDATES = 10
_QUERY_WORDS = 12

Search = Callable[[str, int], Sequence[Hit]]


def replacement_query(hit: Hit) -> str | None:
    """The hit's own words to search near it: its title, else the start of its text."""
    title = hit.memory.content_title.strip()
    if len(title) >= 3:
        return title
    text = (hit.memory.content_summary or hit.memory.content_body).split()
    query = " ".join(text[:_QUERY_WORDS])
    return query if len(query) >= 3 else None


def _better(candidates: Sequence[Hit], weak: Hit, seen: set[str]) -> Hit | None:
    """The best unseen candidate scoring above the weak hit on the same search."""
    baseline = next((c.score for c in candidates if c.id == weak.id), 0.0)
    fresh = [c for c in candidates if c.id not in seen and c.score > baseline]
    return max(fresh, key=lambda c: (c.score, c.id), default=None)


def replace_weak(
    hits: Sequence[Hit],
    search: Search,
    *,
    floor: float,
    max_replacements: int,
    sub_queries: Sequence[str] = (),
    min_results: int = 0,
    has_time: Callable[[], bool] = lambda: True,
    good_score: float | None = None,
) -> ReplaceOutcome:
    """Replace or drop hits below ``floor``, in the order given; one scoring at least ``good_score``
    (a good candidate, as merge's refill reads one) is replaced when something better is found,
    never dropped for nothing."""
    if not hits:
        return ReplaceOutcome(hits=())
    seen = {h.id for h in hits}
    protected: dict[int, str] = {}
    for hit in hits:
        protected.setdefault(hit.sub_query, hit.id)
    weak = [h for h in hits if h.score < floor and protected[h.sub_query] != h.id and replacement_query(h)]
    examined = {h.id for h in sorted(weak, key=lambda h: (h.score, h.id))[:max_replacements]}
    outcome: dict[str, Hit | None] = {}  # examined id -> its replacement, or None when dropped
    attempted = successful = 0
    remaining = len(hits)
    for hit in sorted((h for h in hits if h.id in examined), key=lambda h: (h.score, h.id)):
        if not has_time():
            break
        attempted += 1
        asked = f"{sub_queries[hit.sub_query]} {replacement_query(hit)}" if hit.sub_query < len(sub_queries) \
            else str(replacement_query(hit))
        try:
            candidates = search(asked, CANDIDATES)
        except Exception as exc:  # a failed replacement search leaves the hit where it is
            logger.debug("stage=replace replacement search failed: %s", exc)
            continue
        best = _better(candidates, hit, seen)
        if best is not None:
            successful += 1
            seen.add(best.id)
            outcome[hit.id] = replace(best, sub_query=hit.sub_query)
        elif remaining > min_results and (good_score is None or hit.score < good_score):
            outcome[hit.id] = None
            remaining -= 1
    kept = [outcome.get(h.id, h) for h in hits]
    dropped = tuple(h.id for h in hits if h.id in outcome and outcome[h.id] is None)
    return ReplaceOutcome(hits=tuple(h for h in kept if h is not None), attempted=attempted,
                          successful=successful, dropped=dropped)
