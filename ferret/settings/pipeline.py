"""The pipeline's settings: its stages, the fusion of retrievers and the memory sections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator

from ferret.records import Section
from ferret.section_words import DEFAULT_INTENT_WORDS, DEFAULT_KINDS
from ferret.settings.strict import Strict

# Seed 002's table: query type -> (text weight, graph weight). Ferret's text side is the lexical
# retriever, with the semantic one taking ``semantic_share`` of it when embeddings are on.
SEED_FUSION_WEIGHTS: dict[str, tuple[float, float]] = {
    "FACTUAL": (0.7, 0.3), "RELATIONAL": (0.2, 0.8), "COMPARATIVE": (0.3, 0.7), "EXPLORATORY": (0.1, 0.9),
    "PROCEDURAL": (0.8, 0.2), "ANALYTICAL": (0.5, 0.5), "UNKNOWN": (0.6, 0.4),
}
QUERY_TYPES = tuple(SEED_FUSION_WEIGHTS)
# What ships (chosen on the LoCoMo dev benchmark, see docs/concepts/fusion.md).
DEFAULT_FUSION_WEIGHTS: dict[str, tuple[float, float]] = {name: (1.0, 0.0) for name in QUERY_TYPES}


class FusionSettings(Strict):
    """Weighted fusion of retrievers : lexical, graph (memories linked to the
    lexical hits) and, when embeddings are on, semantic."""

    # Query type -> (text, graph) weights; a type left out keeps its shipped weights.
    weights: dict[str, tuple[float, float]] = DEFAULT_FUSION_WEIGHTS
    # The seed's overrides: FACTUAL & confident -> text only; EXPLORATORY -> graph only; RELATIONAL with no
    # entity -> even. Off with the shipped table (an EXPLORATORY question would lose 70% of its lexical hits).
    seed_overrides: bool = False
    semantic_share: float = Field(0.2, ge=0, le=1)  # of the text weight, when the semantic retriever is available
    # The parts of a decomposed question are searched without it (it lost on compound questions: see
    # docs/concepts/fusion.md).
    semantic_on_parts: bool = False
    skip_threshold: float = Field(0.15, ge=0, le=1)  # a retriever weighted below this is not run
    # A retriever whose top score is under its threshold gives weight away; each on its own scale: the
    # seed's 0.3, but lexical at the quality gate's own "weak" (0.2), as BM25 scores run lower.
    confidence_thresholds: dict[Literal["lexical", "graph", "semantic"], float] = {
        "lexical": 0.2, "graph": 0.3, "semantic": 0.3}
    max_shift: float = Field(0.3, ge=0, le=1)  # shift = max_shift x (1 - confidence / threshold)
    graph_seeds: int = Field(5, ge=1, le=50)  # the lexical hits whose links the graph retriever follows
    method: Literal["weighted", "rrf"] = "weighted"
    """How the retrievers' lists become one: weighted (weight x score, capped per retriever) or rrf
    (reciprocal-rank fusion, weight / (rrf_k + rank), rescaled to the best top score; docs/concepts/fusion.md)."""
    rrf_k: int = Field(60, ge=1, le=1000)
    """Reciprocal-rank fusion's constant: larger flattens the difference between ranks."""

    @field_validator("weights")
    @classmethod
    def _known_query_types(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        """Unknown query types are an error; a type left out keeps the shipped weights."""
        unknown = sorted(set(value) - set(QUERY_TYPES))
        if unknown:
            raise ValueError(f"unknown query types {unknown} (known: {', '.join(QUERY_TYPES)})")
        for name, pair in value.items():
            if any(w < 0 or w > 1 for w in pair) or sum(pair) <= 0:
                raise ValueError(f"{name}: each weight in [0, 1], not both 0")
        return {**DEFAULT_FUSION_WEIGHTS, **value}


def _section_name(value: object) -> object:
    return value.strip().upper() if isinstance(value, str) else value


class SectionSettings(Strict):
    """Memory sections for any domain (ferret/section_words.py has the shipped tables).

    A memory's section: its kind's in ``kinds`` (its subtype without ``custom:``, else its type); for a
    kind not named there, the one its backend gave (Nous's ``memory_section``), else ``default``. A query's
    intents: the sections whose ``intent_words`` it contains (whole words, any case);
    ``pipeline.intent_boost`` multiplies the scores of hits in those sections. Kinds given here are added
    to the shipped table (a kind mapped anew wins); a section given in ``intent_words`` replaces that
    section's words. Kinds and words are kept in lower case."""

    kinds: dict[str, Section] = DEFAULT_KINDS
    """Memory kind (its subtype without custom:, else its type) -> section; added to the shipped table."""
    default: Section = Section.KNOWLEDGE
    """The section of a memory whose kind is not in kinds and whose backend named none."""
    intent_words: dict[Section, tuple[str, ...]] = DEFAULT_INTENT_WORDS
    """Section -> words or phrases that, in a query, make it about that section (whole words, any case)."""

    @field_validator("default", mode="before")
    @classmethod
    def _default_any_case(cls, value: object) -> object:
        return _section_name(value)

    @field_validator("kinds", mode="before")
    @classmethod
    def _kinds_any_case(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        return {str(kind).strip().lower().removeprefix("custom:"): _section_name(section)
                for kind, section in value.items()}

    @field_validator("kinds")
    @classmethod
    def _kinds_added(cls, value: dict[str, Section]) -> dict[str, Section]:
        if any(not kind for kind in value):
            raise ValueError("a kind is a subtype or type name, not empty")
        return {**DEFAULT_KINDS, **value}

    @field_validator("intent_words", mode="before")
    @classmethod
    def _words_any_case(cls, value: object) -> object:
        if not isinstance(value, Mapping):
            return value
        return {_section_name(section): words for section, words in value.items()}

    @field_validator("intent_words")
    @classmethod
    def _words_replace(cls, value: dict[Section, tuple[str, ...]]) -> dict[Section, tuple[str, ...]]:
        for section, words in value.items():
            if any(not word.strip() for word in words):
                raise ValueError(f"{section.value}: an intent word is a word or phrase, not empty")
        return {**DEFAULT_INTENT_WORDS, **{s: tuple(w.strip().lower() for w in ws) for s, ws in value.items()}}


class PipelineSettings(Strict):
    """Retrieval pipeline knobs (the deployed values)."""

    enabled: bool = True
    """The whole multi-pass pipeline; false: one plain search, formatted (the off switch)."""
    quality_threshold: float = Field(0.20, ge=0, le=1)
    """A sub-query whose best score is below this is weak: the quality gate retries it once, reformulated."""
    relevance_ratio: float = Field(0.4, ge=0, le=1)
    """The dynamic cutoff: results scoring below top score x this are dropped (the coverage guarantee aside)."""
    max_results: int = Field(20, ge=1, le=200)
    """The hard cap on results a job returns (a request's options.max_results may ask for fewer)."""
    min_results: int = Field(10, ge=0, le=200)
    """Results kept whatever the cutoff says, when there are that many candidates."""
    # Asked for max_results: candidates the dynamic cutoff dropped that score at least this come back,
    # up to max_results (None: the cutoff alone decides).
    good_score: float | None = Field(0.1, ge=0, le=1)
    max_sub_queries: int = Field(4, ge=1, le=10)
    """At most this many parts when a compound question is split."""
    max_retries: int = Field(1, ge=0, le=3)
    """Quality-gate retries per sub-query (one smart retry, with a reformulated query)."""
    # A sub-query whose search and retry found nothing gets one more try: the semantic retriever when it is
    # on, else the words that begin with its words ("fly" -> "flights").
    widen_empty_parts: bool = True
    timeout_seconds: float = Field(3.0, gt=0, le=600)
    """The retrieval stages' budget (all searches, retries, replacements), capped by the job's deadline."""
    search_limit_per_query: int = Field(25, ge=1, le=500)
    """Hits each search asks the backend for (x moderate_depth_factor on a MODERATE route)."""
    replacement_floor: float = Field(0.25, ge=0, le=1)
    """Results below this score get one replacement search from their title (when max_replacements > 0)."""
    # Replace-weak is off by default (the spec's 2 when on): it changed nothing measurable on LoCoMo's
    # left-out folds (docs/evidence/retrieval.md).
    max_replacements: int = Field(0, ge=0, le=20)
    intent_boost: float = Field(1.3, ge=1.0, le=5.0)
    """Score multiplier for hits in a section the query is about; original_score is kept."""
    # A hit by or about a name the question names (a transcript line's speaker, its title's names):
    # score x subject_boost (worker/pipeline/subjects.py; 1.0 switches it off).
    subject_boost: float = Field(2.0, ge=1.0, le=5.0)
    recency_half_life_days: float | None = Field(None, gt=0, le=36_500)
    """Recency (off when None): a memory this many days older than the newest candidate scores half as much
    (its event time, else its write time; worker/pipeline/recency.py). A request's
    options.recency_half_life_days replaces it."""
    diversity: float | None = Field(None, ge=0, le=1)
    """Diversity (off when None): the final list in maximal-marginal-relevance order, this weight on relevance
    and the rest on being unlike the results above it (1: unchanged; worker/pipeline/diversity.py). A
    request's options.diversity replaces it."""
    max_context_tokens: int = Field(4000, ge=50, le=200_000)
    """The formatted context's size cap, in estimated tokens."""
    moderate_depth_factor: float = Field(1.5, ge=1.0, le=4.0)
    """Search depth multiplier for queries routed MODERATE."""
    # Messages with nothing to search get an ``ok`` result without a search (case and punctuation
    # aside), and a leading timestamp is stripped before retrieval.
    trivial_messages: tuple[str, ...] = (
        "ok", "okay", "k", "kk", "thanks", "thank you", "thx", "ty", "cool", "nice", "great", "got it", "sure",
        "yes", "no", "yep", "nope", "lol", "hmm", "alright", "all right", "good", "perfect",
        "merci", "d'accord", "oui", "non", "parfait", "gracias", "vale", "sí", "si", "perfecto",
        "danke", "ja", "nein", "gut", "alles klar",
    )
    strip_timestamps: bool = True
    """Take a leading timestamp off a message before retrieval."""
    fusion: FusionSettings = FusionSettings()
    sections: SectionSettings = SectionSettings()
