"""Memory sections (seed 003): a memory's section from its kind, and a query's intent.

The tables come from ``pipeline.sections`` (ferret/section_words.py ships
them); ``sections_for`` turns those settings into one ``SectionMap``, built
once per settings object.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from ferret.records import Memory, Section
from ferret.settings import SectionSettings


@lru_cache(maxsize=1024)
def subtype_label(subtype: str | None) -> str:
    """``custom:lesson`` -> ``lesson``."""
    if not subtype:
        return ""
    return subtype.removeprefix("custom:")


def _pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    """Whole words or phrases: "live" must not fire on "deliver", "rule" on "ruler"."""
    if not words:
        return None
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)) + r")\b")


class SectionMap:
    """One settings' sections: ``of(memory)`` and ``intents(query)``. The tables are as
    ``SectionSettings`` leaves them: kinds and intent words in lower case, kinds without ``custom:``."""

    def __init__(self, kinds: Mapping[str, Section], default: Section,
                 intent_words: Mapping[Section, tuple[str, ...]]) -> None:
        self._kinds = kinds
        self._default = default
        self._patterns = [(section, pattern) for section, words in intent_words.items()
                          if (pattern := _pattern(words)) is not None]

    def of(self, memory: Memory) -> Section:
        """A memory's section: the table's for its subtype, else for its type; for a kind the table does
        not name, the one its backend gave (Nous's ``memory_section``), else the default."""
        kinds = self._kinds
        return ((kinds.get(subtype_label(memory.subtype).lower()) if memory.subtype else None)
                or kinds.get(memory.type.lower()) or memory.memory_section or self._default)

    def intents(self, query: str) -> tuple[Section, ...]:
        """Sections the query asks for, in the table's order; empty means no boost."""
        lowered = query.lower()
        return tuple(section for section, pattern in self._patterns if pattern.search(lowered))


_BUILT: dict[int, tuple[SectionSettings, SectionMap]] = {}


def sections_for(settings: SectionSettings) -> SectionMap:
    """The map of these settings (built once per settings object)."""
    built = _BUILT.get(id(settings))
    if built is not None and built[0] is settings:
        return built[1]
    if len(_BUILT) >= 64:
        _BUILT.clear()
    section_map = SectionMap(settings.kinds, settings.default, settings.intent_words)
    _BUILT[id(settings)] = (settings, section_map)
    return section_map


DEFAULT_SECTIONS = sections_for(SectionSettings())
