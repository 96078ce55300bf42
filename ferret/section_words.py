"""What the four memory sections (seed 003) are made of, for any domain:
which kinds of memory belong to each, and the words of a question that ask
for each, in English, French, Spanish and German.

A memory's kind is its subtype (``custom:`` aside) when the table knows it,
else its type. The general kinds come first; seed 003's trading subtypes are
kept as the example it gave. ``pipeline.sections`` adds to or overrides both
tables (docs/concepts/sections.md).
"""

from __future__ import annotations

from ferret.records import Section

EPISODIC, SIGNALS, KNOWLEDGE, PROCEDURAL = Section.EPISODIC, Section.SIGNALS, Section.KNOWLEDGE, Section.PROCEDURAL

# What happened (episodes), what is live or pending now (signals), what is known or preferred (knowledge),
# how to do something (procedures).
GENERAL_KINDS: dict[str, Section] = {
    **dict.fromkeys(("event", "episode", "episodic", "conversation", "message", "turn", "meeting", "trip",
                     "journal", "diary", "log", "experience", "interaction", "session"), EPISODIC),
    **dict.fromkeys(("signal", "alert", "reminder", "notification", "todo", "task", "deadline", "plan", "goal",
                     "observation"), SIGNALS),
    **dict.fromkeys(("concept", "fact", "preference", "knowledge", "semantic", "note", "belief", "opinion",
                     "profile", "person", "contact", "lesson", "insight"), KNOWLEDGE),
    **dict.fromkeys(("procedure", "procedural", "howto", "how-to", "recipe", "instruction", "instructions",
                     "workflow", "routine", "skill", "checklist", "playbook"), PROCEDURAL),
}

# Seed 003's example: a trading agent's subtypes.
TRADING_KINDS: dict[str, Section] = {
    **dict.fromkeys(("trade_entry", "trade_close", "trade_modify", "trade", "turn_summary", "session_summary",
                     "market_event"), EPISODIC),
    **dict.fromkeys(("signal", "watchpoint"), SIGNALS),
    **dict.fromkeys(("lesson", "thesis", "curiosity"), KNOWLEDGE),
    **dict.fromkeys(("playbook", "missed_opportunity", "good_pass"), PROCEDURAL),
}

DEFAULT_KINDS: dict[str, Section] = {**GENERAL_KINDS, **TRADING_KINDS}

# Words (whole words or phrases, any case) that ask for a section. General ones in four languages, then
# seed 003's trading words.
GENERAL_INTENT_WORDS: dict[Section, tuple[str, ...]] = {
    SIGNALS: (
        "right now", "currently", "at the moment", "upcoming", "pending", "reminder", "remind me", "alert",
        "alerts", "deadline", "to do", "todo",
        "en ce moment", "actuellement", "à venir", "en attente", "rappel", "rappelle-moi", "alerte", "échéance",
        "ahora mismo", "actualmente", "en este momento", "próximo", "próxima", "pendiente", "recordatorio",
        "recuérdame", "alerta", "plazo",
        "gerade", "aktuell", "im moment", "anstehend", "ausstehend", "erinnerung", "erinnere mich", "warnung",
        "frist",
    ),
    EPISODIC: (
        "what happened", "when did", "last time", "yesterday", "last week", "last month", "last year",
        "remember when", "did i", "did we",
        "que s'est-il passé", "qu'est-ce qui s'est passé", "quand ai-je", "quand avons-nous", "la dernière fois",
        "hier", "la semaine dernière", "le mois dernier", "l'année dernière",
        "qué pasó", "cuándo", "la última vez", "ayer", "la semana pasada", "el mes pasado", "el año pasado",
        "was ist passiert", "wann habe ich", "wann haben wir", "das letzte mal", "letztes mal", "gestern",
        "letzte woche", "letzten monat", "letztes jahr",
    ),
    KNOWLEDGE: (
        "what do i know", "prefer", "preference", "preferences", "favourite", "favorite", "fact", "facts",
        "why",
        "que sais-je", "qu'est-ce que je sais", "préfère", "préféré", "préférée", "préférence", "pourquoi",
        "leçon", "appris",
        "qué sé", "prefiero", "preferido", "preferida", "preferencia", "favorito", "favorita", "por qué",
        "lección", "aprendí",
        "was weiß ich", "bevorzuge", "vorliebe", "lieblings", "warum", "lektion", "gelernt",
    ),
    PROCEDURAL: (
        "how do i", "how to", "how should i", "steps", "recipe", "instructions", "routine", "checklist",
        "comment faire", "comment je", "étapes", "recette", "marche à suivre", "procédure",
        "cómo hago", "cómo se hace", "pasos", "receta", "instrucciones", "procedimiento",
        "wie mache ich", "wie macht man", "schritte", "rezept", "anleitung", "ablauf",
    ),
}

TRADING_INTENT_WORDS: dict[Section, tuple[str, ...]] = {
    SIGNALS: (
        "signal", "signals", "firing", "active signal", "what's happening", "whats happening", "right now",
        "current", "live", "real-time", "realtime", "alert", "anomaly", "anomalies", "scanner", "watchpoint",
        "watchpoints", "watching",
    ),
    EPISODIC: (
        "my trade", "my position", "my trades", "my positions", "last time", "when did i", "when i",
        "trade history", "what happened", "my short", "my long", "entry", "exit", "closed", "opened", "pnl",
        "profit", "loss", "drawdown", "session", "conversation", "yesterday", "last week",
    ),
    KNOWLEDGE: (
        "lesson", "lessons", "learned", "learning", "principle", "principles", "what do i know", "thesis",
        "theses", "theory", "pattern", "insight", "insights", "wisdom", "rule", "why does", "why do", "how does",
        "how do", "understand", "explain",
    ),
    PROCEDURAL: (
        "playbook", "playbooks", "procedure", "process", "how do i trade", "my setup", "my process", "steps for",
        "strategy for", "approach for", "when i see", "my plan for", "template", "missed opportunity",
        "good pass",
    ),
}

DEFAULT_INTENT_WORDS: dict[Section, tuple[str, ...]] = {
    section: tuple(dict.fromkeys((*GENERAL_INTENT_WORDS[section], *TRADING_INTENT_WORDS[section])))
    for section in GENERAL_INTENT_WORDS  # this order is the order of a query's intents
}
