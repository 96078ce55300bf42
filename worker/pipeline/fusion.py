"""Weighted fusion of retrievers (seed 002, section 3), for one search.

Phase A, weights: the query type's (text, graph) pair from the table; the
text weight goes to the lexical retriever, less ``semantic_share`` of it for
the semantic one when that is available. The seed's overrides: a confident
FACTUAL query (> 0.7) is text only, an EXPLORATORY one graph only, a
RELATIONAL one with no entity even.

Phase B, skips: a retriever weighted under ``skip_threshold`` is not run.
The lexical search always runs (its hits are the graph's seeds), but it
contributes only with a weight above zero.

Phase C, the proportional shift: a retriever that ran and whose top score
is under its ``confidence_thresholds`` entry gives ``max_shift x (1 - confidence /
threshold)`` of its weight (never more than it has) to the others that ran,
in proportion to their weights.

Phase D, proportional caps and the fused list: each retriever contributes
its first ``max(1, round(n x weight))`` hits (none at weight 0). A memory's
fused score is the sum over retrievers of ``weight / top weight x score``
(capped at 1): with one retriever at full weight that is its own score, so
the stages after this one (dynamic cutoff, quality gate, replacement floor)
read scores on the scale they always had, and a memory several retrievers
found ranks higher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ferret.records import Hit
from ferret.settings import FusionSettings
from ferret.worker.pipeline.classify import Classification, QueryType

LEXICAL, GRAPH, SEMANTIC = "lexical", "graph", "semantic"
RETRIEVERS = (LEXICAL, GRAPH, SEMANTIC)
# Seed 002: a FACTUAL query classified this confidently needs no graph.
CONFIDENT_FACTUAL = 0.7


@dataclass(frozen=True)
class WeightPlan:
    weights: dict[str, float]  # retriever -> weight, before any shift
    override: str | None  # factual_confident | exploratory | relational_no_entity
    run: tuple[str, ...]  # the retrievers to run
    skipped: tuple[str, ...]  # weighted but under the skip threshold (or unavailable: weight 0)


@dataclass
class Fused:
    hits: list[Hit]
    weights: dict[str, float]  # after the shifts
    shifts: dict[str, float] = field(default_factory=dict)  # retriever -> weight it gave away
    confidence: dict[str, float] = field(default_factory=dict)  # retriever -> its top score
    contributed: dict[str, int] = field(default_factory=dict)  # retriever -> hits it put in the list
    mode: str = "weighted"  # adaptive: every retriever that ran was weak


def assign_weights(classification: Classification, settings: FusionSettings,
                   available: Sequence[str]) -> WeightPlan:
    """Phases A and B: the weights for this query, and which retrievers run."""
    text, graph = settings.weights[classification.query_type.value]
    override = None
    if settings.seed_overrides:
        if classification.query_type is QueryType.FACTUAL and classification.confidence > CONFIDENT_FACTUAL:
            text, graph, override = 1.0, 0.0, "factual_confident"
        elif classification.query_type is QueryType.EXPLORATORY:
            text, graph, override = 0.0, 1.0, "exploratory"
        elif classification.query_type is QueryType.RELATIONAL and not classification.entities:
            text, graph, override = 0.5, 0.5, "relational_no_entity"
    share = settings.semantic_share if SEMANTIC in available else 0.0
    weights = {LEXICAL: text * (1 - share), GRAPH: graph if GRAPH in available else 0.0, SEMANTIC: text * share}
    if GRAPH not in available and graph > 0:  # no graph here: its weight goes to the text side
        weights[LEXICAL] += graph * (1 - share)
        weights[SEMANTIC] += graph * share
    weights = {name: round(value, 6) for name, value in weights.items()}
    run = tuple(name for name in RETRIEVERS
                if name == LEXICAL or (weights[name] >= settings.skip_threshold and weights[name] > 0))
    skipped = tuple(name for name in RETRIEVERS if name not in run and weights[name] > 0)
    return WeightPlan(weights, override, run, skipped)


def shift_weights(weights: Mapping[str, float], confidence: Mapping[str, float],
                  settings: FusionSettings) -> tuple[dict[str, float], dict[str, float], str]:
    """Phase C: weights after the weak retrievers gave some away; the shifts; the mode."""
    ran = [name for name in RETRIEVERS if name in confidence]
    shifted = dict(weights)
    shifts: dict[str, float] = {}
    threshold = {name: settings.confidence_thresholds.get(name, 0.3) for name in ran}  # type: ignore[call-overload]
    weak = [name for name in ran if weights[name] > 0 and confidence[name] < threshold[name]]
    for name in weak:
        receivers = [other for other in ran if other != name and other not in weak]
        if not receivers:
            continue
        amount = min(shifted[name],
                     settings.max_shift * (1 - confidence[name] / threshold[name]))
        if amount <= 0:
            continue
        total = sum(shifted[other] for other in receivers)
        for other in receivers:
            share = shifted[other] / total if total > 0 else 1 / len(receivers)
            shifted[other] += amount * share
        shifted[name] -= amount
        shifts[name] = round(amount, 6)
    weighted = [name for name in ran if weights[name] > 0]
    mode = "adaptive" if weighted and all(name in weak for name in weighted) else "weighted"
    return {name: round(value, 6) for name, value in shifted.items()}, shifts, mode


def cap(count: int, weight: float) -> int:
    """Seed 002: how many of a retriever's ``count`` hits it may contribute."""
    return 0 if weight <= 0 or count == 0 else max(1, round(count * weight))


def fuse(results: Mapping[str, Sequence[Hit]], plan: WeightPlan, settings: FusionSettings) -> Fused:
    """Phases C and D over the retrievers' hits (each best first)."""
    confidence = {name: max((h.score for h in hits), default=0.0) for name, hits in results.items()}
    weights, shifts, mode = shift_weights(plan.weights, confidence, settings)
    if settings.method == "rrf":
        return _reciprocal_rank(results, weights, shifts, confidence, settings.rrf_k, mode)
    top = max((weights[name] for name in results), default=0.0) or 1.0
    scores, first, contributed = _summed(
        results, lambda name, hits: [(hit, weights[name] / top * hit.score)
                                     for hit in hits[: cap(len(hits), weights[name])]])
    fused = [first[i] if first[i].score == scores[i] else
             replace(first[i], score=min(1.0, scores[i]), original_score=min(1.0, scores[i])) for i in scores]
    return _ranked(fused, weights, shifts, confidence, contributed, mode)


def _reciprocal_rank(results: Mapping[str, Sequence[Hit]], weights: dict[str, float], shifts: dict[str, float],
                     confidence: dict[str, float], k: int, mode: str) -> Fused:
    """Reciprocal-rank fusion: a memory scores the sum over retrievers of ``weight / (k + its rank there)``
    (every hit of every retriever weighted above zero), rescaled so the first keeps the best top score."""
    scores, first, contributed = _summed(
        results, lambda name, hits: [(hit, weights[name] / (k + rank)) for rank, hit in enumerate(hits, 1)]
        if weights.get(name, 0.0) > 0 else [])
    best = max(scores.values(), default=0.0)
    scale = min(1.0, max((confidence[name] for name in results if weights.get(name, 0.0) > 0), default=0.0))
    fused = [replace(first[i], score=scores[i] / best * scale, original_score=scores[i] / best * scale)
             for i in scores] if best > 0 else []
    return _ranked(fused, weights, shifts, confidence, contributed, mode)


def _summed(results: Mapping[str, Sequence[Hit]],
            points: Callable[[str, Sequence[Hit]], list[tuple[Hit, float]]]) -> tuple[
        dict[str, float], dict[str, Hit], dict[str, int]]:
    """Each memory's points summed over the retrievers (``points``: the hits a retriever contributes and
    what each is worth), its first hit, and how many hits each retriever contributed."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    contributed: dict[str, int] = {}
    for name in RETRIEVERS:
        scored = points(name, results.get(name, ()))
        contributed[name] = len(scored)
        for hit, value in scored:
            scores[hit.id] = scores.get(hit.id, 0.0) + value
            first.setdefault(hit.id, hit)
    return scores, first, contributed


def _ranked(fused: list[Hit], weights: dict[str, float], shifts: dict[str, float], confidence: dict[str, float],
            contributed: dict[str, int], mode: str) -> Fused:
    fused.sort(key=lambda h: (-h.score, h.id))
    return Fused(fused, weights, shifts, {name: round(value, 4) for name, value in confidence.items()},
                 contributed, mode)
