"""Stage 2, complexity (seed 002): a weighted score and a route.

    score = 0.25 query_type + 0.20 entities + 0.20 sub-questions
          + 0.20 keyword matches + 0.15 low confidence

SIMPLE below 0.35, MODERATE below 0.55 (retrieval depth x1.5), else COMPLEX.

Two overrides come after the formula (seed 002): a question about the
memory store itself ("how many documents are in the database?") is raised
to at least 0.75 (``meta``); an ambiguous message (under 15 characters,
several question marks, "either ... or") to at least 0.65 with the route
AMBIGUOUS (``ambiguous``). Patterns in the four languages the classifier
knows. Trivial messages never get here (``ferret.worker.pipeline.trivial``).

The query routed is the one the pipeline searches: after the rewrite that
resolves its references from the conversation. A message whose references
were resolved that way is not short for want of meaning ("how did it go"
became "how did SOL go"): the shortness test leaves it alone; several
question marks or "either ... or" still make it ambiguous.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ferret.worker.pipeline.classify import Classification, QueryType

SIMPLE_BELOW = 0.35
MODERATE_BELOW = 0.55

_TYPE_WEIGHT = {
    QueryType.FACTUAL: 0.0,
    QueryType.PROCEDURAL: 0.0,
    QueryType.UNKNOWN: 0.0,
    QueryType.RELATIONAL: 0.5,
    QueryType.EXPLORATORY: 0.5,
    QueryType.ANALYTICAL: 1.0,
    QueryType.COMPARATIVE: 1.0,
}


META_AT_LEAST = 0.75
AMBIGUOUS_AT_LEAST = 0.65
AMBIGUOUS_SHORTER_THAN = 15

_STORE = (r"(?:documents?|docs?|memories|memory|notes?|entries|records?|items?|database|db|store|"
          r"souvenirs?|m[ée]moires?|base|fiches?|documentos?|recuerdos?|memorias?|notas?|registros?|"
          r"dokumente?|erinnerungen|eintr[äa]ge?|notizen|datenbank|speicher)")
_META_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in (
    rf"\bhow many {_STORE}\b",
    rf"\b(?:count|number) of (?:all )?(?:my |the )?{_STORE}\b",
    rf"\b(?:list|show|enumerate) (?:me )?(?:all|every) (?:(?:my|the) )?{_STORE}\b",
    rf"\bwhat(?:'s| is) in (?:the|my) {_STORE}\b",
    rf"\bcombien (?:de |d')\s*{_STORE}",
    rf"\b(?:liste|lister|montre|affiche)[rz]? (?:tou[st]e?s? )?(?:les |mes )?{_STORE}\b",
    rf"\bcu[áa]nt[oa]s {_STORE}",
    rf"\b(?:lista|listar|muestra|mostrar) tod[oa]s (?:los |las |mis )?{_STORE}\b",
    rf"\bwie viele {_STORE}",
    rf"\b(?:liste|zeige?|zeig) (?:mir )?alle (?:meine[n]? )?{_STORE}\b",
    rf"\banzahl (?:der |an )?{_STORE}",
))
_EITHER_OR = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"\beither\b.+\bor\b", r"\bou\b.+\bou\b", r"\bo bien\b.+\bo\b|\bo\b.+\bo bien\b",
    r"\bentweder\b.+\boder\b", r"\bsoit\b.+\bsoit\b",
))


class Route(enum.StrEnum):
    SIMPLE = "SIMPLE"
    MODERATE = "MODERATE"
    COMPLEX = "COMPLEX"
    AMBIGUOUS = "AMBIGUOUS"  # forced by the ambiguity override: the agent would ask for clarification
    TRIVIAL = "TRIVIAL"  # "ok", "thanks", a bare timestamp: answered without a search


@dataclass(frozen=True, slots=True)
class Complexity:
    score: float
    route: Route
    factors: dict[str, float]
    formula_score: float = 0.0  # the weighted sum before any override
    override: str | None = None  # meta | ambiguous


def is_meta_question(query: str) -> bool:
    """A question about the memory store itself (how many, list all)."""
    return any(p.search(query) for p in _META_PATTERNS)


def is_ambiguous(query: str, resolved: bool = False) -> bool:
    """Too short to mean one thing (unless its references were ``resolved`` from the conversation),
    several question marks, or either ... or."""
    text = " ".join(query.split())
    return ((len(text) < AMBIGUOUS_SHORTER_THAN and not resolved) or text.count("?") >= 2
            or any(p.search(text) for p in _EITHER_OR))


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def evaluate_complexity(classification: Classification, sub_question_count: int, query: str = "",
                        resolved: bool = False) -> Complexity:
    """Score a classified query (``sub_question_count`` is at least 1), then
    apply the overrides to ``query``'s text (``resolved``: the rewrite resolved references in it)."""
    factors = {
        "query_type": _TYPE_WEIGHT[classification.query_type],
        "entity_count": _clamp(len(classification.entities) / 4),
        "subquestion_count": _clamp((max(sub_question_count, 1) - 1) / 3),
        "keyword_matches": _clamp(classification.keyword_matches / 4),
        "low_confidence": _clamp((0.7 - classification.confidence) / 0.5),
    }
    score = round(
        0.25 * factors["query_type"]
        + 0.20 * factors["entity_count"]
        + 0.20 * factors["subquestion_count"]
        + 0.20 * factors["keyword_matches"]
        + 0.15 * factors["low_confidence"],
        4,
    )
    formula, override = score, None
    if query and is_meta_question(query):
        score, override = max(score, META_AT_LEAST), "meta"
    elif query and is_ambiguous(query, resolved):
        score, override = max(score, AMBIGUOUS_AT_LEAST), "ambiguous"
    if override == "ambiguous":
        route = Route.AMBIGUOUS
    elif score < SIMPLE_BELOW:
        route = Route.SIMPLE
    elif score < MODERATE_BELOW:
        route = Route.MODERATE
    else:
        route = Route.COMPLEX
    return Complexity(score=score, route=route, factors=factors, formula_score=formula, override=override)
