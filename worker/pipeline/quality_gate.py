"""Stage 5, quality gate: one reformulated retry when a search looks weak.

A search is weak when nothing came back or its top score is below the
threshold. The retry uses the query with question words stripped (else the
entity alone) and drops the subtype filter; retry hits are merged into the
originals by id, keeping the higher score.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferret.records import Hit
from ferret.text import strip_question_words
from ferret.worker.pipeline.classify import Classification


def is_weak(hits: Sequence[Hit], threshold: float) -> bool:
    """True when nothing came back or the best score is below ``threshold``."""
    return not hits or max(h.score for h in hits) < threshold


def reformulate(query: str, classification: Classification | None) -> str | None:
    """A different query to retry with, or None when there is none."""
    simplified = strip_question_words(query)
    if len(simplified) > 3 and simplified.lower() != query.strip(" ?!.").lower():
        return simplified
    entity = classification.entity if classification else None
    if entity and len(entity) > 2 and entity.lower() != query.strip(" ?!.").lower():
        return entity
    return None


def merge_by_id(original: Sequence[Hit], extra: Sequence[Hit]) -> tuple[Hit, ...]:
    """Union by id keeping the higher score, sorted by score (ties by id)."""
    best: dict[str, Hit] = {}
    for hit in (*original, *extra):
        kept = best.get(hit.id)
        if kept is None or hit.score > kept.score:
            best[hit.id] = hit
    return tuple(sorted(best.values(), key=lambda h: (-h.score, h.id)))
