"""The first stages of a run, which plan the search: classify (and the remote classifier, when asked),
decompose, complexity and the route, and the retrievers' weights (seed 002's fusion)."""

from __future__ import annotations

from ferret.worker.backends.base import retrievers_of
from ferret.worker.pipeline.classify import Classification, classify
from ferret.worker.pipeline.complexity import Route, evaluate_complexity
from ferret.worker.pipeline.decompose import decompose
from ferret.worker.pipeline.fusion import RETRIEVERS, SEMANTIC, assign_weights
from ferret.worker.pipeline.run_state import PipelineRun, Plan


def _remote_classification(run: PipelineRun, local: Classification) -> Classification:
    timeout = run.budget.cap(run.settings.timeout_seconds)
    remote = run.bounded(lambda: run.backend.classify(run.query, timeout=timeout))
    if remote is None:
        run.stats.plan.remote_classifier = "failed"
        return local
    run.stats.plan.remote_classifier = "ok"
    extra = remote.get("disqualifier_category")
    codes = set(local.disqualifiers) | ({extra} if isinstance(extra, str) and extra else set())
    entity = local.entity or (remote.get("entity") if isinstance(remote.get("entity"), str) else None)
    return Classification(
        disqualifiers=tuple(sorted(codes)), query_type=local.query_type,
        confidence=local.confidence, entity=entity, attribute=local.attribute,
        entities=local.entities, intents=local.intents, keyword_matches=local.keyword_matches,
    )


def plan(run: PipelineRun, use_remote_classifier: bool) -> Plan:
    with run.tracer.span("classify") as span:
        classification = classify(run.query, run.sections)
        if use_remote_classifier:
            classification = _remote_classification(run, classification)
        span.set(disqualifiers=list(classification.disqualifiers),
                 query_type=classification.query_type.value,
                 intents=[s.value for s in classification.intents])
    run.timed("classify", span)
    with run.tracer.span("decompose") as span:
        decomposition = decompose(run.query, classification, run.settings.max_sub_queries)
        span.set(parts=len(decomposition.parts), strategy=decomposition.strategy)
    run.timed("decompose", span)
    with run.tracer.span("complexity") as span:
        asked = max(len(decomposition.parts), run.sub_questions_asked)
        complexity = evaluate_complexity(classification, asked, run.query,
                                         resolved=bool(run.stats.prepared.references_resolved))
        span.set(score=complexity.score, route=complexity.route.value, formula_score=complexity.formula_score,
                 override=complexity.override or "none",
                 **{f"factor.{name}": round(value, 4) for name, value in complexity.factors.items()})
    run.timed("complexity", span)
    factor = 1.0 if complexity.route is Route.SIMPLE else run.settings.moderate_depth_factor
    limit = round(run.settings.search_limit_per_query * factor)
    stats = run.stats.plan
    stats.complexity_score, stats.route = complexity.score, complexity.route.value
    stats.complexity_factors = {name: round(value, 4) for name, value in complexity.factors.items()}
    stats.complexity_override = complexity.override
    stats.query_type = classification.query_type.value
    stats.disqualifiers = list(classification.disqualifiers)
    stats.intents = [s.value for s in classification.intents]
    stats.was_decomposed = decomposition.was_decomposed
    stats.decomposition_strategy = decomposition.strategy
    stats.sub_queries = list(decomposition.parts)
    available = retrievers_of(run.backend)
    if decomposition.was_decomposed and not run.settings.fusion.semantic_on_parts:
        available = tuple(name for name in available if name != SEMANTIC)
    weights = assign_weights(classification, run.settings.fusion, available)
    stats.fusion = {"weights": weights.weights, "override": weights.override, "ran": list(weights.run),
                    "skipped": list(weights.skipped), "final_weights": [], "shifts": [],
                    "contributed": dict.fromkeys(RETRIEVERS, 0), "adaptive": 0, "errors": {}}
    return Plan(classification, decomposition, complexity, limit, weights)
