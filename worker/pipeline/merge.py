"""Stage 6, merge & select.

1. intent boost: ``score x boost`` for hits whose section matches an intent,
   ``original_score`` kept (a multiplier, never a filter); then the subject
   boost: ``score x subject_boost`` for hits by or about a name the
   sub-query names (``ferret.worker.pipeline.subjects``); with recency on,
   the decay by age (``ferret.worker.pipeline.recency``);
2. each sub-query's hits ranked by score, ties by id;
3. dynamic cutoff, per sub-query: keep hits scoring at least that
   sub-query's top x ``relevance_ratio`` (a weak part is judged against its
   own best, not cut away by a strong part);
4. interleave: the best hit of every sub-query first (in the order the
   question asked them), then every sub-query's second, and so on. On LoCoMo
   this beat one list sorted by raw score, whose scores are not comparable
   across different queries (so neither is a round ordered by score), and
   it gives the coverage guarantee for free: one hit for each sub-query
   that found any;
5. dedup by id: a memory found by several sub-queries keeps its highest
   score and its first place;
6. hard cap at ``max_results``; and the cutoff never leaves fewer than
   ``min_results`` hits when the searches found that many (the best of the
   cut ones fill up, interleaved the same way).

With a single sub-query this is: sort by score, cut, cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import zip_longest

from ferret.records import Hit, Section, SubQueryOutcome
from ferret.worker.pipeline.recency import apply_recency, newest_of
from ferret.worker.pipeline.sections import DEFAULT_SECTIONS, SectionMap
from ferret.worker.pipeline.subjects import apply_subject_boost, named_in


def apply_intent_boost(hits: Sequence[Hit], intents: Sequence[Section], boost: float,
                       sections: SectionMap = DEFAULT_SECTIONS) -> list[Hit]:
    """Multiply scores of hits in an intended section; never a filter."""
    if not intents or boost <= 1.0:
        return list(hits)
    wanted = set(intents)
    return [
        replace(h, score=h.original_score * boost, boosted=True)
        if sections.of(h.memory) in wanted else h
        for h in hits
    ]


def _rank(hits: Iterable[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda h: (-h.score, h.id))


def _ranked(outcome: SubQueryOutcome, intents: Sequence[Section], boost: float, sections: SectionMap,
            subject_boost: float, recency: tuple[float, float | None] | None = None) -> list[Hit]:
    """One sub-query's hits: boosted (and decayed by age, with ``recency``: half-life in days, newest
    candidate's time), ranked, tagged with it."""
    boosted = apply_subject_boost(apply_intent_boost(outcome.hits, intents, boost, sections),
                                  named_in(outcome.query), subject_boost)
    if recency is not None:
        boosted = apply_recency(boosted, *recency)
    ranked = _rank(boosted)
    return [h if h.sub_query == outcome.index else replace(h, sub_query=outcome.index) for h in ranked]


def _cut(ranked: list[Hit], ratio: float) -> list[Hit]:
    """The ranked hits scoring at least the top one's x ``ratio``."""
    if not ranked:
        return []
    cutoff = ranked[0].score * ratio
    return [h for h in ranked if h.score >= cutoff]


def merge_and_select(
    outcomes: Sequence[SubQueryOutcome],
    *,
    intents: Sequence[Section] = (),
    intent_boost: float = 1.0,
    subject_boost: float = 1.0,
    relevance_ratio: float,
    max_results: int,
    min_results: int = 0,
    good_score: float | None = None,
    sections: SectionMap = DEFAULT_SECTIONS,
    recency_half_life_days: float | None = None,
) -> tuple[Hit, ...]:
    """Merge sub-query outcomes into one cut, interleaved and capped list."""
    recency = None
    if recency_half_life_days is not None:  # one reference for every part: the newest candidate of them all
        recency = (recency_half_life_days, newest_of(h for o in outcomes for h in o.hits))
    lists = [_ranked(o, intents, intent_boost, sections, subject_boost, recency) for o in outcomes]
    selected = _interleave([_cut(hits, relevance_ratio) for hits in lists])
    if len(selected) < max_results:
        taken = {h.id for h in selected}
        every = _interleave(lists)
        rest = [h for h in every if h.id not in taken]
        refill = rest[: max(0, min_results - len(selected))]  # the cutoff may not starve the context
        selected += tuple(refill)
        if good_score is not None:  # asked for k: the good candidates the cutoff dropped come back
            selected += tuple(h for h in rest[len(refill):] if h.score >= good_score)
    return selected[:max_results]


def _interleave(lists: Sequence[Sequence[Hit]]) -> tuple[Hit, ...]:
    """Round by round, in the order the question asked its parts; a memory several parts found takes
    its first place and the hit (score, sub-query) where it scored best."""
    best: dict[str, Hit] = {}
    for hit in (h for hits in lists for h in hits):
        if hit.id not in best or hit.score > best[hit.id].score:
            best[hit.id] = hit
    placed: dict[str, Hit] = {}
    for round_ in zip_longest(*lists):
        for hit in (h for h in round_ if h is not None):
            placed.setdefault(hit.id, best[hit.id])
    return tuple(placed.values())
