"""Turn a pipeline result into the stored result document."""

from __future__ import annotations

from collections.abc import Sequence

from ferret.contract import ResultItem
from worker.pipeline.formatting import preview
from worker.pipeline.records import Hit
from worker.pipeline.sections import section_for_subtype

PREVIEW_CHARS = 300


def result_items(hits: Sequence[Hit], sub_queries: Sequence[str]) -> list[ResultItem]:
    items = []
    for hit in hits:
        memory = hit.memory
        text = preview(memory)
        items.append(ResultItem.model_construct(  # built from validated records
            id=memory.id,
            score=round(hit.score, 6),
            original_score=round(hit.original_score, 6),
            section=section_for_subtype(memory.subtype).value,
            subtype=memory.subtype,
            sub_query=hit.sub_query,
            sub_query_text=sub_queries[hit.sub_query] if hit.sub_query < len(sub_queries) else None,
            title=memory.content_title,
            preview=text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…",
            date=(memory.temporal_event_time or memory.provenance_created_at or None),
        ))
    return items
