"""Weighted fusion of retrievers (seed 002, section 3)."""

import pytest

from ferret.errors import BackendUnavailable
from ferret.records import Hit, Memory
from ferret.settings import SEED_FUSION_WEIGHTS, FusionSettings, PipelineSettings
from ferret.tracing import SpanCollector
from ferret.worker.backends.memory import InMemoryBackend
from ferret.worker.co_retrieval.affinity import InMemoryAffinity
from ferret.worker.pipeline.classify import Classification, QueryType
from ferret.worker.pipeline.fusion import assign_weights, cap, fuse, shift_weights
from ferret.worker.pipeline.orchestrator import run_pipeline

SEED = FusionSettings(weights=SEED_FUSION_WEIGHTS, seed_overrides=True)
BOTH = ("lexical", "graph")
ALL = ("lexical", "graph", "semantic")


def _classified(query_type, confidence=0.6, entities=("BTC",)):
    return Classification(disqualifiers=(), query_type=query_type, confidence=confidence,
                          entity=entities[0] if entities else None, attribute=None, entities=entities,
                          intents=(), keyword_matches=0)


def _hits(prefix, scores):
    return [Hit.of(Memory(id=f"{prefix}{i}", content_body=f"{prefix} {i}"), s) for i, s in enumerate(scores)]


@pytest.mark.parametrize(("query_type", "expected"), list(SEED_FUSION_WEIGHTS.items()))
def test_the_seed_table_gives_the_text_weight_to_lexical_and_the_rest_to_graph(query_type, expected):
    plan = assign_weights(_classified(QueryType(query_type), confidence=0.6), SEED, BOTH)
    if query_type == "EXPLORATORY":
        expected = (0.0, 1.0)  # the seed's override
    assert (plan.weights["lexical"], plan.weights["graph"], plan.weights["semantic"]) == (*expected, 0.0)


def test_the_seed_overrides():
    confident = assign_weights(_classified(QueryType.FACTUAL, confidence=0.8), SEED, BOTH)
    assert (confident.weights["lexical"], confident.weights["graph"], confident.override) == (
        1.0, 0.0, "factual_confident")
    assert confident.run == ("lexical",)
    nobody = assign_weights(_classified(QueryType.RELATIONAL, entities=()), SEED, BOTH)
    assert (nobody.weights["lexical"], nobody.weights["graph"], nobody.override) == (0.5, 0.5, "relational_no_entity")
    off = assign_weights(_classified(QueryType.EXPLORATORY), SEED.model_copy(update={"seed_overrides": False}), BOTH)
    assert (off.weights["lexical"], off.weights["graph"], off.override) == (0.1, 0.9, None)


def test_a_retriever_under_fifteen_percent_is_not_run():
    settings = SEED.model_copy(update={"seed_overrides": False})
    plan = assign_weights(_classified(QueryType.PROCEDURAL), settings, BOTH)  # 0.8 / 0.2
    assert plan.run == ("lexical", "graph")
    plan = assign_weights(_classified(QueryType.EXPLORATORY), settings, BOTH)  # 0.1 / 0.9
    assert plan.run == ("lexical", "graph"), "lexical always runs: its hits seed the graph"
    low = settings.model_copy(update={"weights": {"PROCEDURAL": (0.9, 0.1)}})
    plan = assign_weights(_classified(QueryType.PROCEDURAL), low, BOTH)
    assert plan.run == ("lexical",) and plan.skipped == ("graph",)


def test_the_semantic_retriever_takes_its_share_of_the_text_weight_only_when_available():
    settings = SEED.model_copy(update={"semantic_share": 0.5})
    plan = assign_weights(_classified(QueryType.PROCEDURAL), settings, ALL)  # 0.8 text
    assert (plan.weights["lexical"], plan.weights["semantic"], plan.weights["graph"]) == (0.4, 0.4, 0.2)
    plan = assign_weights(_classified(QueryType.PROCEDURAL), settings, ("lexical",))
    assert (plan.weights["lexical"], plan.weights["semantic"], plan.weights["graph"]) == (1.0, 0.0, 0.0)


@pytest.mark.parametrize(("confidence", "shift"), [(0.30, 0.0), (0.25, 0.05), (0.15, 0.15), (0.0, 0.3)])
def test_the_shift_is_proportional_to_how_weak_a_retriever_was(confidence, shift):
    weights, shifts, mode = shift_weights({"lexical": 0.3, "graph": 0.7, "semantic": 0.0},
                                          {"lexical": 0.6, "graph": confidence}, SEED)
    assert shifts.get("graph", 0.0) == pytest.approx(shift)
    assert weights["graph"] == pytest.approx(0.7 - shift) and weights["lexical"] == pytest.approx(0.3 + shift)
    assert mode == "weighted"


def test_when_every_retriever_is_weak_nothing_shifts_and_the_mode_is_adaptive():
    weights, shifts, mode = shift_weights({"lexical": 0.7, "graph": 0.3, "semantic": 0.0},
                                          {"lexical": 0.1, "graph": 0.0}, SEED)
    assert (weights["lexical"], weights["graph"], shifts, mode) == (0.7, 0.3, {}, "adaptive")


def test_a_shift_never_takes_more_than_the_weight():
    weights, shifts, _ = shift_weights({"lexical": 0.9, "graph": 0.1, "semantic": 0.0},
                                       {"lexical": 0.8, "graph": 0.0}, SEED)
    assert shifts == {"graph": 0.1} and weights == {"lexical": 1.0, "graph": 0.0, "semantic": 0.0}


def test_caps_are_proportional_with_one_at_least():
    assert (cap(10, 0.1), cap(10, 0.9), cap(5, 0.1), cap(10, 0.0), cap(0, 0.5)) == (1, 9, 1, 0, 0)


def test_fusion_keeps_the_proportional_share_of_each_retriever_and_sums_scores():
    plan = assign_weights(_classified(QueryType.ANALYTICAL), SEED, BOTH)  # 0.5 / 0.5
    lexical = _hits("l", [0.8, 0.7, 0.6, 0.5])
    graph = [*_hits("g", [0.4, 0.35, 0.3, 0.3]), Hit.of(lexical[3].memory, 0.45)]
    fused = fuse({"lexical": lexical, "graph": graph}, plan, SEED)
    assert fused.contributed == {"lexical": 2, "graph": 2, "semantic": 0}
    assert [h.id for h in fused.hits] == ["l0", "l1", "g0", "g1"]
    one_retriever = fuse({"lexical": lexical}, assign_weights(_classified(QueryType.FACTUAL, 0.9), SEED, BOTH), SEED)
    assert [(h.id, h.score) for h in one_retriever.hits] == [(h.id, h.score) for h in lexical], "same scale"


def _linked_store():
    memories = [Memory(id="thesis", content_body="BTC thesis: halving supply shock"),
                Memory(id="stop", content_body="placed the stop under the weekly low"),  # no query word
                Memory(id="noise", content_body="ETH gas fees")]
    links = InMemoryAffinity()
    links.strengthen([["thesis", "stop"]], 0.8)
    return InMemoryBackend(memories, links=links)


GRAPH_HEAVY = PipelineSettings(fusion=FusionSettings(weights={"FACTUAL": (0.5, 0.5), "UNKNOWN": (0.5, 0.5)}))


def test_the_graph_retriever_brings_in_a_memory_linked_to_a_lexical_hit():
    tracer = SpanCollector()
    result = run_pipeline("BTC thesis", _linked_store(), GRAPH_HEAVY, tracer=tracer)
    assert [h.id for h in result.hits] == ["thesis", "stop"]
    fusion = result.stats.plan.fusion
    assert fusion["ran"] == ["lexical", "graph"] and fusion["contributed"] == {"lexical": 1, "graph": 1, "semantic": 0}
    assert fusion["weights"] == {"lexical": 0.5, "graph": 0.5, "semantic": 0.0}
    span = next(s for s in tracer.spans if s.name == "fusion")
    assert span.attributes["contributed.graph"] == 1 and "weight.graph" in span.attributes
    lexical_only = run_pipeline("BTC thesis", _linked_store(), PipelineSettings())
    assert [h.id for h in lexical_only.hits] == ["thesis"] and lexical_only.stats.plan.fusion["ran"] == ["lexical"]


def test_a_graph_with_no_links_gives_its_weight_back_to_lexical():
    store = InMemoryBackend([Memory(id="thesis", content_body="BTC thesis")], links=InMemoryAffinity())
    result = run_pipeline("BTC thesis", store, GRAPH_HEAVY)
    assert result.stats.plan.fusion["shifts"] == [{"graph": 0.3}]
    assert result.stats.plan.fusion["final_weights"] == [{"lexical": 0.8, "graph": 0.2, "semantic": 0.0}]
    assert [h.id for h in result.hits] == ["thesis"]


def test_a_failing_graph_retriever_costs_its_results_not_the_search():
    store = _linked_store()

    def broken(*args, **kwargs):
        raise BackendUnavailable("memory", "links unreachable")
    store.linked = broken
    result = run_pipeline("BTC thesis", store, GRAPH_HEAVY)
    assert [h.id for h in result.hits] == ["thesis"] and not result.partial
    assert result.stats.plan.fusion["errors"] == {"graph": 1}


class ConceptEmbedder:
    """A stand-in model: words of one concept share a dimension ("car" and "automobile" are alike)."""

    name = "concepts"
    CONCEPTS = ({"car", "automobile", "vehicle"}, {"dog", "puppy"}, {"sold", "sell", "selling"}, {"paris", "france"})

    def __init__(self):
        self.calls = 0

    def embed(self, texts, timeout=None):
        import numpy as np
        self.calls += 1
        rows = np.zeros((len(texts), len(self.CONCEPTS) + 1), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in text.lower().replace("?", " ").split():
                hits = [i for i, concept in enumerate(self.CONCEPTS) if word in concept]
                for i in hits:
                    row[i] += 1
            row[-1] = 0.1  # every text a little alike
        return rows


def _semantic_store():
    memories = [Memory(id="auto", content_body="Sold the old automobile last spring"),
                Memory(id="pup", content_body="Adopted a puppy"),
                Memory(id="trip", content_body="Trip to France in June")]
    return InMemoryBackend(memories, embedder=ConceptEmbedder())


def test_the_semantic_retriever_finds_what_the_words_do_not():
    settings = PipelineSettings(fusion=FusionSettings(semantic_share=0.5))
    result = run_pipeline("When did I sell my car?", _semantic_store(), settings)
    assert result.hits and result.hits[0].id == "auto"
    assert result.stats.plan.fusion["ran"] == ["lexical", "semantic"]
    assert result.stats.plan.fusion["contributed"]["semantic"] >= 1
    lexical_only = run_pipeline("When did I sell my car?", _semantic_store(),
                                PipelineSettings(fusion=FusionSettings(semantic_share=0.0)))
    assert "auto" not in [h.id for h in lexical_only.hits]


def test_the_parts_of_a_decomposed_question_are_searched_without_the_semantic_retriever():
    store = _semantic_store()
    result = run_pipeline("When did I sell my car? Where did the trip go?", store,
                          PipelineSettings(fusion=FusionSettings(semantic_share=0.5)))
    assert result.stats.plan.was_decomposed and result.stats.plan.fusion["ran"] == ["lexical"]
    on_parts = run_pipeline("When did I sell my car? Where did the trip go?", store,
                            PipelineSettings(fusion=FusionSettings(semantic_share=0.5, semantic_on_parts=True)))
    assert on_parts.stats.plan.fusion["ran"] == ["lexical", "semantic"]


def test_each_retriever_is_judged_weak_on_its_own_scale():
    settings = FusionSettings(confidence_thresholds={"lexical": 0.2, "graph": 0.3, "semantic": 0.3})
    weights = {"lexical": 0.8, "graph": 0.0, "semantic": 0.2}
    _, shifts, _ = shift_weights(weights, {"lexical": 0.25, "semantic": 0.6}, settings)
    assert shifts == {}, "0.25 is not weak for BM25"
    _, shifts, _ = shift_weights(weights, {"lexical": 0.1, "semantic": 0.6}, settings)
    assert shifts == {"lexical": pytest.approx(0.15)}


def test_reciprocal_rank_fusion_ranks_by_ranks_and_keeps_the_score_scale():
    """RRF: a memory two retrievers rank high beats one only the stronger-scoring retriever ranks first, and
    no retriever's list is capped; the first fused hit keeps the best retriever's top score (the later
    stages' scale)."""
    from ferret.worker.pipeline.fusion import WeightPlan

    shared = Memory(id="both", content_body="both")
    lexical = [Hit.of(Memory(id="lex", content_body="lex"), 0.9), Hit.of(shared, 0.5)]
    semantic = [Hit.of(shared, 0.6), Hit.of(Memory(id="sem", content_body="sem"), 0.55)]
    plan = WeightPlan({"lexical": 0.5, "graph": 0.0, "semantic": 0.5}, None, ("lexical", "semantic"), ())
    weighted = fuse({"lexical": lexical, "semantic": semantic}, plan, FusionSettings(max_shift=0.0))
    rrf = fuse({"lexical": lexical, "semantic": semantic}, plan, FusionSettings(method="rrf", max_shift=0.0))
    assert [h.id for h in weighted.hits] == ["lex", "both"]  # each retriever's first hit only (its cap: 1 of 2)
    assert [h.id for h in rrf.hits] == ["both", "lex", "sem"]
    assert rrf.hits[0].score == pytest.approx(0.9)  # the best top score among the retrievers
    assert rrf.hits[1].score < rrf.hits[0].score and rrf.contributed == {"lexical": 2, "graph": 0, "semantic": 2}
