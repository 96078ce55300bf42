"""Text normalisation, in one place: question words, stopwords, tokenising,
and the cache key's normal form.

Every stage that reads a query's words takes them from here: the classifier
(entities and the attribute), the quality gate (the reformulated retry), the
local backend's BM25 tokenizer, the cache key, and the LoCoMo benchmark's
compound questions. A new language, or a word added to a list, is one change
here.

Question words are kept per language as regular-expression alternatives
(accents optional where people leave them out); word lists are sets.
"""

from __future__ import annotations

import re

QUESTION_WORDS: dict[str, str] = {
    "en": r"what(?:'s|s)?|when|where|who|whom|whose|which|how|why",
    "fr": r"quel(?:le)?s?|qui|o[uù]|quand|comment|pourquoi|est-ce que",
    "es": r"qu[ée]|cu[aá]l|d[oó]nde|cu[aá]ndo|qui[eé]n|c[oó]mo|por qu[ée]",
    "de": r"wer|wo|wann|welche[rs]?|wie|warum",
}
# The question words an entity is never made of, in every language (plain forms).
EN_QUESTION_WORD_SET = frozenset("what what's whats when where who whom whose which how why".split())
QUESTION_WORD_SET = frozenset(
    "what what's whats when where who whom whose which how why "  # EN_QUESTION_WORD_SET
    "quel quelle quels quelles qui quand comment pourquoi "
    "qué cuál dónde cuándo quién cómo "
    "was wer wo wann wie warum welche welcher welches".split()
)

AUXILIARIES = frozenset("is are was were did does do".split())
MODALS = frozenset("can could would should".split())
PERFECT = frozenset("have has had".split())
PRONOUNS = frozenset("i me my we our you your he she his her they them their it its this that these those".split())
ARTICLES_AND_LINKS = frozenset("a an the and or".split())
# Capitalised words that name a time, not anyone or anything a question is about.
CALENDAR = frozenset("""january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday""".split())
# Asking verbs a query may open with ("tell me about ...", "find ...").
REQUEST_PHRASES = r"tell me about|tell me|show me|give me|remind me|find|get|check"

# A question's opening word or auxiliary (what the benchmark lowercases when it joins two questions).
_OPENING = re.compile(
    r"^(?:" + QUESTION_WORDS["en"] + "|" + "|".join(sorted((AUXILIARIES | MODALS | PERFECT) - {"had", "should"}))
    + r")\b", re.IGNORECASE)
# What the quality gate strips for its retry: question words of every language, auxiliaries, asking verbs.
_STRIPPED = re.compile(
    r"\b(?:" + QUESTION_WORDS["en"] + "|" + "|".join(sorted(AUXILIARIES | MODALS)) + "|" + REQUEST_PHRASES
    + "|" + "|".join(QUESTION_WORDS[lang] for lang in ("fr", "es", "de")) + r")\b",
    re.IGNORECASE,
)
_SPACES = re.compile(r"\s+")
_TRAILING = re.compile(r"[?.!,;:\s]+$")
WORD = re.compile(r"[A-Za-zÀ-ÿ0-9][\w'&.-]*")  # a word as the classifier reads one (tickers, "S&P", "Q3.")
TOKEN = re.compile(r"(?u)\b\w\w+\b")  # a word as the BM25 tokenizer reads one


def strip_question_words(query: str) -> str:
    """The query without question words, auxiliaries and asking verbs."""
    simplified = _STRIPPED.sub(" ", query)
    return _SPACES.sub(" ", simplified).strip(" ?!.,;:")


def lexical_form(query: str) -> str:
    """What the lexical retriever searches: the query without its question words, when
    something is left (they match every question-like memory and rank nothing)."""
    stripped = strip_question_words(query)
    return stripped if len(stripped) > 3 else query


def starts_with_question_word(text: str) -> bool:
    return _OPENING.match(text) is not None


def cache_form(query: str) -> str:
    """The query as the cache key sees it: lowercase, whitespace collapsed, trailing punctuation gone."""
    return _TRAILING.sub("", _SPACES.sub(" ", query.lower()).strip())
