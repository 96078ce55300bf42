"""Stage 2, complexity (seed 002): a weighted score and a route.

    score = 0.25 query_type + 0.20 entities + 0.20 sub-questions
          + 0.20 keyword matches + 0.15 low confidence

SIMPLE below 0.35, MODERATE below 0.55 (retrieval depth x1.5), else COMPLEX.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from worker.pipeline.classify import Classification, QueryType

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


class Route(enum.StrEnum):
    SIMPLE = "SIMPLE"
    MODERATE = "MODERATE"
    COMPLEX = "COMPLEX"


@dataclass(frozen=True, slots=True)
class Complexity:
    score: float
    route: Route
    factors: dict[str, float]


def _clamp(value: float) -> float:
    return max(0.0, min(1.0, value))


def evaluate_complexity(classification: Classification, sub_question_count: int) -> Complexity:
    """Score a classified query; ``sub_question_count`` is at least 1."""
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
    if score < SIMPLE_BELOW:
        route = Route.SIMPLE
    elif score < MODERATE_BELOW:
        route = Route.MODERATE
    else:
        route = Route.COMPLEX
    return Complexity(score=score, route=route, factors=factors)
