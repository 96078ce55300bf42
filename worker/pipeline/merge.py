"""Stage 6, merge & select.

1. dedup by id, keeping the highest score (and the sub-query that found it);
2. intent boost: ``score x boost`` for hits whose section matches an intent,
   ``original_score`` kept;
3. sort by score, ties by id;
4. dynamic cutoff: keep hits with score >= top x ``relevance_ratio``;
5. coverage guarantee: one hit for each sub-query that found any;
6. hard cap at ``max_results`` (coverage hits are kept before others, the
   overall best hit is always kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from worker.pipeline.records import Hit, Section, SubQueryOutcome
from worker.pipeline.sections import section_for_subtype


def _dedup(outcomes: Sequence[SubQueryOutcome]) -> dict[str, Hit]:
    best: dict[str, Hit] = {}
    for outcome in outcomes:
        for hit in outcome.hits:
            tagged = hit if hit.sub_query == outcome.index else replace(hit, sub_query=outcome.index)
            kept = best.get(hit.id)
            if kept is None or tagged.score > kept.score:
                best[hit.id] = tagged
    return best


def apply_intent_boost(hits: Sequence[Hit], intents: Sequence[Section], boost: float) -> list[Hit]:
    """Multiply scores of hits in an intended section; never a filter."""
    if not intents or boost <= 1.0:
        return list(hits)
    wanted = set(intents)
    return [
        replace(h, score=h.original_score * boost, boosted=True)
        if section_for_subtype(h.memory.subtype) in wanted else h
        for h in hits
    ]


def _rank(hits: Iterable[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda h: (-h.score, h.id))


def merge_and_select(
    outcomes: Sequence[SubQueryOutcome],
    *,
    intents: Sequence[Section] = (),
    intent_boost: float = 1.0,
    relevance_ratio: float,
    max_results: int,
) -> tuple[Hit, ...]:
    """Merge sub-query outcomes into one ranked, cut and capped list."""
    ranked = _rank(apply_intent_boost(list(_dedup(outcomes).values()), intents, intent_boost))
    if not ranked:
        return ()
    cutoff = ranked[0].score * relevance_ratio
    required: dict[int, Hit] = {}  # the best hit of every sub-query that found any
    for hit in ranked:
        required.setdefault(hit.sub_query, hit)
    selected = _rank(required.values())[:max_results]
    taken = {h.id for h in selected}
    for hit in ranked:
        if len(selected) >= max_results or hit.score < cutoff:
            break
        if hit.id not in taken:
            selected.append(hit)
            taken.add(hit.id)
    return tuple(_rank(selected))
