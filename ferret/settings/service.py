"""The service around the pipeline: Redis, tracing, the queues and deadlines, limits on input, the cache,
the circuit breakers and security."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from ferret.errors import ConfigError
from ferret.settings.strict import Strict


class RedisSettings(Strict):
    """``url`` unset means the shared embedded redis-server of ``embedded_dir``,
    stopped after ``embedded_idle_seconds`` with no client (0: only by
    ``ferret redis stop``)."""

    url: str | None = None
    """The queue Redis (queues, results, traces, and memories unless backend.local.store_url): redis://, rediss://,
    unix://, redis+sentinel://, redis+cluster://. Unset: the shared embedded server."""
    embedded_dir: str = "~/.local/share/ferret/redis"
    """Where the shared embedded redis-server keeps its data, socket and state."""
    embedded_idle_seconds: float = Field(default=900.0, ge=0)
    """The embedded server stops after this long with no client (0: only on 'ferret redis stop')."""
    # Failover (Redis Sentinel): Redis replicates asynchronously, so a write the primary
    # acknowledged can be lost when a replica is promoted. With min_replicas_acked > 0 every
    # enqueue and every result write waits (WAIT) until that many replicas have it, at most
    # replica_ack_timeout_ms; a waiting producer checks every failover_check_seconds that its
    # job still exists and enqueues it again if a failover lost it (0: never).
    min_replicas_acked: int = Field(default=0, ge=0, le=16)
    replica_ack_timeout_ms: int = Field(default=1000, ge=1, le=60_000)
    """How long an enqueue or a result write waits for min_replicas_acked replicas."""
    failover_check_seconds: float = Field(default=2.0, ge=0)
    """A waiting producer checks this often that its job still exists, and enqueues it again if a failover lost it (0:
    never)."""


class TracingSettings(Strict):
    """Where spans go besides Redis: with ``otlp_endpoint`` set (an OTLP/HTTP
    traces URL such as ``http://localhost:4318/v1/traces``: Jaeger, Grafana
    Tempo, an OpenTelemetry Collector) each worker also exports every job's
    spans there, in the background (needs the ``otlp`` extra)."""

    otlp_endpoint: str | None = None
    """An OTLP/HTTP traces URL that every job's spans are also exported to (needs the otlp extra)."""
    otlp_timeout_seconds: float = Field(5.0, gt=0, le=60)
    """One OTLP export, at most."""
    # The share of ``ok`` jobs whose trace is kept in Redis (chosen by trace id, so every
    # worker keeps the same ones); a job that ends otherwise always keeps its trace.
    redis_sample_rate: float = Field(1.0, ge=0, le=1)
    service_name: str = Field("ferret-worker", min_length=1, max_length=200)
    """The service.name of exported spans."""


class ServiceSettings(Strict):
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
    """How long a batch job's result stays in Redis."""
    batch_trace_ttl_seconds: int = Field(3_600, ge=1)
    """How long a batch job's trace stays in Redis."""
    prefetch_deadline_seconds: float = Field(5.0, gt=0, le=3600)
    """A prefetch job's deadline when the request names none."""
    batch_deadline_seconds: float = Field(600.0, gt=0, le=86_400)
    """A batch job's deadline when the request names none."""
    hard_timeout_grace_seconds: float = Field(2.0, ge=0.5, le=600)
    """RQ's hard timeout is the deadline plus this: a job that overruns its deadline is killed."""
    record_query_text: bool = True
    """Keep query text in traces and stats; false: only lengths and counts."""
    worker_class: Literal["simple", "fork"] = "simple"
    """simple: jobs run in the worker process (warm caches); fork: each job in a forked work horse (isolation)."""
    # A worker that stops heart-beating this long is dead; its jobs are re-run
    # (time left, not re-run before) or end "failed". Checked every reaper_interval.
    worker_ttl_seconds: int = Field(16, ge=5, le=3600)
    reaper_interval_seconds: float = Field(1.0, gt=0, le=600)
    """How often a worker looks for jobs of dead workers."""
    max_reruns: int = Field(1, ge=0, le=5)
    """How many times a dead worker's job is run again (time left permitting) before it ends failed."""
    # How often one worker trims RQ's registries and sweeps the intermediate queue (RQ's default).
    maintenance_interval_seconds: int = Field(600, ge=1, le=86_400)
    # RQ's bookkeeping without repeats (ferret.rq_layer.bookkeeping); false: stock RQ's, every write it makes.
    lean_bookkeeping: bool = True
    jobs_per_trip: int = Field(16, ge=1, le=256)
    """The most jobs a simple worker takes off a deep queue in one round trip and ends in one transaction
    (the lean layer; as many as the recent jobs run in 25 ms; one when one waits); 1: one job a trip."""
    batch_lines_per_job: int = Field(16, ge=1, le=256)
    """How many lines of a batch ride in one RQ job (a carrier: ``ferret.carriers``), each still its own
    request (job id, claim, deadline, result, trace); 1: one RQ job a line."""
    jobs_per_horse: int = Field(1000, ge=1, le=1_000_000)
    """How many jobs a forking worker's work horse runs before a fresh one is forked (the lean layer:
    ``ferret.rq_layer.kept_horse``); 1: RQ's own, a horse forked for every job."""


class LimitSettings(Strict):
    """Input and output limits, all enforced at the producer and the worker."""

    max_query_chars: int = Field(8000, ge=1, le=1_000_000)
    """The longest query accepted."""
    max_history_turns: int = Field(10, ge=0, le=100)
    """The most conversation turns a request may carry."""
    max_history_turn_chars: int = Field(4000, ge=1, le=1_000_000)
    """The longest history turn accepted."""
    max_namespace_chars: int = Field(64, ge=1, le=256)
    """The longest namespace accepted."""
    max_request_id_chars: int = Field(128, ge=1, le=512)
    """The longest request id accepted."""
    max_results: int = Field(100, ge=1, le=1000)
    """The largest options.max_results a request may ask for."""
    max_deadline_seconds: float = Field(86_400.0, gt=0)
    """The longest deadline a request may ask for."""
    max_trace_spans: int = Field(500, ge=10)
    """Spans kept in one job's trace; past it, spans are dropped and counted."""
    max_result_bytes: int = Field(2_000_000, ge=10_000)
    """A result larger than this is cut (its context and last results) and marked truncated."""
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


class CacheSettings(Strict):
    """Retrieval cache in Redis, shared by all workers; coalescing of identical prefetch requests."""

    enabled: bool = True
    """The retrieval cache: the same request at the same memory version answers from Redis."""
    ttl_seconds: int = Field(300, ge=1, le=86_400)
    """How long a cache entry may be served."""
    coalesce: bool = True
    """Identical prefetch requests in flight at once run as one job."""
    # A remote backend (nous) has no version Ferret can see: writes through Ferret invalidate at once,
    # writes made to the server directly are seen after at most this long (the TTL of its entries).
    remote_staleness_seconds: int = Field(10, ge=1, le=3600)
    # The cache's size cap: past it the oldest entries are deleted as new ones are written.
    max_entries: int = Field(10_000, ge=1, le=10_000_000)

    def ttl_for(self, backend_kind: str) -> int:
        """How long an entry may be served: the staleness bound caps it for remote backends."""
        return self.ttl_seconds if backend_kind == "local" else min(self.ttl_seconds, self.remote_staleness_seconds)


class BreakerSettings(Strict):
    """A circuit breaker per outside endpoint (chat model, embeddings, Nous server; ``ferret.breaker``):
    ``failures`` failures in a row (unreachable, timed out, 5xx) within ``window_seconds`` skip the
    endpoint on every worker for ``cooldown_seconds``; then one failure opens it again, one success closes it."""

    enabled: bool = True
    """Circuit breakers for outside endpoints (chat, embeddings, Nous)."""
    failures: int = Field(5, ge=1, le=1000)
    """Failures in a row within window_seconds that open an endpoint's circuit."""
    window_seconds: float = Field(30.0, gt=0, le=3600)
    """The window those failures must fall in."""
    cooldown_seconds: float = Field(10.0, gt=0, le=3600)
    """How long an open circuit skips its endpoint on every worker."""


class SecuritySettings(Strict):
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


# A request rate in the limits library's notation ("50/second", "600 per minute"); a key's own --rate too.
RATE_PATTERN = r"^\d{1,9} ?(/|per) ?(second|minute|hour|day)$"


class HttpSettings(Strict):
    """``ferret serve``: the HTTP API's limits. The rate is per key across every server (counted in Redis);
    the others hold per connection."""

    rate_limit: str = Field("50/second", pattern=RATE_PATTERN)
    """Requests one key may make ("50/second", "600/minute", "10000/hour"); a key made with --rate has its own.
    Past it: 429 with Retry-After."""
    failed_keys_per_id: str = Field("10/minute", pattern=RATE_PATTERN)
    """Wrong keys one key id may be tried with on one server; past it: 429 with Retry-After, and no key is
    looked up until the window moves on."""
    failed_keys_per_address: str = Field("60/minute", pattern=RATE_PATTERN)
    """Wrong keys one client address may send to one server; past it: 429 with Retry-After."""
    cors_origins: tuple[str, ...] = ()
    """Web origins (scheme://host[:port]) whose pages may call the API from a browser; empty: none. A
    preflight from one of them is answered before any key is asked for."""
    max_body_bytes: int = Field(1_048_576, ge=1024, le=100_000_000)
    """A request body above this is refused with 413, before it is read."""
    head_timeout_seconds: float = Field(10.0, gt=0, le=600)
    """A connection must send a request's head (request line and headers) within this, or it is closed."""
    body_timeout_seconds: float = Field(30.0, gt=0, le=600)
    """A request's body must arrive within this once its head has, or it is refused with 408."""
    idle_seconds: float = Field(5.0, gt=0, le=600)
    """A kept-alive connection with no next request is closed after this."""
    max_wait_seconds: float = Field(300.0, gt=0, le=3600)
    """The longest a query request waits for its result (its own ``wait_seconds`` may be less)."""
