"""Memory sections (seed 003): subtype to section, and query intent."""

from __future__ import annotations

import re
from functools import lru_cache

from ferret.records import Memory, Section

_SUBTYPE_SECTIONS: dict[str, Section] = {
    **dict.fromkeys(
        ("trade_entry", "trade_close", "trade_modify", "trade", "turn_summary",
         "session_summary", "market_event"),
        Section.EPISODIC,
    ),
    **dict.fromkeys(("signal", "watchpoint"), Section.SIGNALS),
    **dict.fromkeys(("lesson", "thesis", "curiosity"), Section.KNOWLEDGE),
    **dict.fromkeys(("playbook", "missed_opportunity", "good_pass"), Section.PROCEDURAL),
}


@lru_cache(maxsize=1024)
def subtype_label(subtype: str | None) -> str:
    """``custom:lesson`` -> ``lesson``."""
    if not subtype:
        return ""
    return subtype.removeprefix("custom:")


@lru_cache(maxsize=1024)
def section_for_subtype(subtype: str | None) -> Section:
    """Section of a subtype; anything unknown is KNOWLEDGE."""
    return _SUBTYPE_SECTIONS.get(subtype_label(subtype), Section.KNOWLEDGE)


def section_of(memory: Memory) -> Section:
    """A memory's section: the one its backend gave (Nous's ``memory_section``), else its subtype's."""
    return memory.memory_section or section_for_subtype(memory.subtype)


_INTENT_KEYWORDS: dict[Section, tuple[str, ...]] = {
    Section.SIGNALS: (
        "signal", "signals", "firing", "active signal", "what's happening",
        "whats happening", "right now", "current", "live", "real-time", "realtime",
        "alert", "anomaly", "anomalies", "scanner", "watchpoint", "watchpoints", "watching",
    ),
    Section.EPISODIC: (
        "my trade", "my position", "my trades", "my positions", "last time", "when did i",
        "when i", "trade history", "what happened", "my short", "my long", "entry", "exit",
        "closed", "opened", "pnl", "profit", "loss", "drawdown", "session", "conversation",
        "yesterday", "last week",
    ),
    Section.KNOWLEDGE: (
        "lesson", "lessons", "learned", "learning", "principle", "principles",
        "what do i know", "thesis", "theses", "theory", "pattern", "insight", "insights",
        "wisdom", "rule", "why does", "why do", "how does", "how do", "understand", "explain",
    ),
    Section.PROCEDURAL: (
        "playbook", "playbooks", "procedure", "process", "how do i trade", "my setup",
        "my process", "steps for", "strategy for", "approach for", "when i see",
        "my plan for", "template", "missed opportunity", "good pass",
    ),
}

# Whole-word matching: "live" must not fire on "deliver", "rule" on "ruler".
_INTENT_PATTERNS: dict[Section, re.Pattern[str]] = {
    section: re.compile(r"\b(?:" + "|".join(re.escape(k) for k in sorted(words, key=len, reverse=True)) + r")\b")
    for section, words in _INTENT_KEYWORDS.items()
}


def classify_intent(query: str) -> tuple[Section, ...]:
    """Sections the query is about, in a fixed order; empty means no boost."""
    lowered = query.lower()
    return tuple(s for s, pattern in _INTENT_PATTERNS.items() if pattern.search(lowered))
