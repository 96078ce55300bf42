"""Stage 8, formatting: the context an agent injects.

One line per hit: ``- [subtype · SECTION] title (date): preview``. JSON
bodies contribute their "text" field. Lines are added best first until
``max_context_tokens`` (estimated at four characters a token) is reached;
the last line that does not fit is shortened, never dropped mid-word.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferret.records import Hit, Memory
from ferret.worker.pipeline.sections import DEFAULT_SECTIONS, SectionMap, subtype_label

CHARS_PER_TOKEN = 4
_MIN_TAIL_CHARS = 40


def estimate_tokens(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def preview(memory: Memory) -> str:
    """Body text (JSON bodies give their "text"), else the summary."""
    return memory.preview


def format_line(hit: Hit, sections: SectionMap = DEFAULT_SECTIONS) -> str:
    memory = hit.memory
    label = subtype_label(memory.subtype) or memory.type
    section = sections.of(memory).value
    title = memory.content_title.strip() or "Untitled"
    date = (memory.temporal_event_time or memory.provenance_created_at or "")[:10]
    dated = f" ({date})" if date else ""
    replaced = " [superseded by the memory above: no longer current]" if hit.superseded_by else ""
    return f"- [{label} · {section}] {title}{dated}{replaced}: {preview(memory)}"


def _shorten(line: str, max_chars: int) -> str:
    cut = line[: max_chars - 1].rsplit(" ", 1)[0]
    return cut + "…"


def format_context(hits: Sequence[Hit], max_tokens: int, sections: SectionMap = DEFAULT_SECTIONS) -> str:
    """Format hits best first within the token budget."""
    budget = max_tokens * CHARS_PER_TOKEN
    lines: list[str] = []
    used = 0
    for hit in hits:
        line = format_line(hit, sections)
        cost = len(line) + 1
        if used + cost <= budget:
            lines.append(line)
            used += cost
            continue
        room = budget - used - 1
        if room >= _MIN_TAIL_CHARS:
            lines.append(_shorten(line, room))
        break
    return "\n".join(lines)
