"""Prometheus metrics, recorded in the worker's main process.

Metrics are recorded from each job's stored result after the job ends, in
the process that runs the RQ work loop. With ``SimpleWorker`` that is the
process that ran the job; with the forking ``Worker`` the job ran in a work
horse whose own counters would die with it, so the parent reads the result
back from Redis. Either way no multiprocess mode is needed and the counts
are exact.

Names carry units, counters end in ``_total``, and every label has a small
fixed set of values created up front; never a query or a job id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ferret import keys
from ferret.contract import FINAL_STATUSES, QUEUES, RetrievalResult
from ferret.stats import REFUSAL_REASONS, JobStats
from ferret.worker.backends.index_registry import directory_bytes
from ferret.worker.endpoint_health import EndpointHealth
from ferret.worker.pipeline.complexity import Route
from ferret.worker.pipeline.fusion import RETRIEVERS

logger = logging.getLogger(__name__)

STAGES = ("cache", "rewrite", "classify", "decompose", "complexity", "search", "merge", "replace", "rerank", "fallback",
          "format")
FALLBACK_OUTCOMES = ("ok", "failed", "timeout")
AGENT_OUTCOMES = ("ok", "clarification", "deadline", "fallback", "disabled")
AGENT_STEP_BUCKETS = (1, 2, 3, 4, 5, 6, 7, 10, 20)
INDEX_READINESS = ("warm", "caught_up", "disk", "snapshot", "shared", "built")
FOLD_WHEN = ("job", "after_job")
# Re-rank outcomes counted; "off" (not asked) and "too_few" (nothing to order) are not.
RERANK_OUTCOMES = ("ok", "disabled", "deadline", "timeout", "error", "malformed", "circuit_open")
BACKEND_OUTCOMES = ("ok", "timeout", "error")
BACKENDS = ("local", "nous")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5)


class IndexBytesCollector(Collector):
    """The local backend's index memory: the size of the worker's index directory
    at scrape time (a work horse's indexes live there too)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def families() -> list[GaugeMetricFamily]:
        """What it exports, with no samples (the reference pages read them)."""
        return [GaugeMetricFamily("ferret_index_bytes", "Bytes held by this worker's local indexes "
                                  "(memory-mapped when open); bounded by backend.local.index_memory_mb.")]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        total = 0
        with contextlib.suppress(FileNotFoundError):
            for namespace_dir in os.scandir(self.root):
                if namespace_dir.is_dir():
                    total += directory_bytes(Path(namespace_dir.path))
        family, = self.families()
        family.add_metric([], total)
        yield family


def _enqueued_at(raw: object) -> float | None:
    """An RQ job's ``enqueued_at`` as epoch seconds; None when it is not one (Redis is untrusted)."""
    try:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        stamp = datetime.fromisoformat(text)  # RQ writes "%Y-%m-%dT%H:%M:%S.%fZ", UTC
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (ValueError, UnicodeDecodeError, OverflowError):
        return None


class CircuitCollector(Collector):
    """Whether each outside endpoint's circuit is open, from Redis at scrape time
    (one round trip per endpoint): the state every worker shares."""

    def __init__(self, health: EndpointHealth) -> None:
        self.health = health

    @staticmethod
    def families() -> list[GaugeMetricFamily]:
        """What it exports, with no samples (the reference pages read them)."""
        return [GaugeMetricFamily("ferret_endpoint_circuit_open", "1 while an outside endpoint's circuit is open "
                                  "(its calls skipped on every worker), else 0.", labels=["endpoint"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family, = self.families()
        for endpoint, breaker in sorted(self.health.breakers.items()):
            family.add_metric([endpoint], 1.0 if breaker.is_open() else 0.0)
        yield family


class QueueDepthCollector(Collector):
    """Reads queue lengths, and how long each queue's oldest job has waited, from
    Redis at scrape time (two round trips): the two signals to scale workers on."""

    def __init__(self, client: redis.Redis, queues: Sequence[str] = QUEUES,
                 now: Callable[[], float] = time.time) -> None:
        """``now``: Redis's clock (``ferret.redis_plumbing.clock``), on which RQ stamps ``enqueued_at``."""
        self.client = client
        self.queues = queues
        self.now = now

    @staticmethod
    def families() -> list[GaugeMetricFamily | CounterMetricFamily]:
        """What it exports, with no samples (the reference pages read them)."""
        return [GaugeMetricFamily("ferret_queue_depth", "RQ jobs waiting in each queue (a batch carrier is one).",
                                  labels=["queue"]),
                GaugeMetricFamily("ferret_queue_oldest_wait_seconds",
                                  "How long the job at the head of each queue has waited (0: empty).",
                                  labels=["queue"]),
                CounterMetricFamily("ferret_superseded", "Prefetches a newer one of their conversation took "
                                    "off the queue (not run; ended expired, stats.superseded_by). Shared by "
                                    "all workers: one Redis counter."),
                CounterMetricFamily("ferret_store_mismatches", "Workers that refused to start because their "
                                    "memory store is not the one this queue's workers read. Shared: one Redis "
                                    "counter.")]

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        family, oldest, superseded, mismatches = self.families()
        try:
            with self.client.pipeline(transaction=False) as pipe:
                for queue in self.queues:
                    pipe.llen(f"rq:queue:{queue}")
                    pipe.lindex(f"rq:queue:{queue}", 0)
                pipe.get(keys.superseded_count())
                pipe.get(keys.store_mismatches())
                *answers, superseded_count, mismatch_count = pipe.execute()
            lengths, heads = answers[0::2], answers[1::2]
            with self.client.pipeline(transaction=False) as pipe:
                for head in heads:
                    pipe.hget(b"rq:job:" + (head if isinstance(head, bytes) else str(head).encode()), "enqueued_at")
                stamps = pipe.execute()
        except redis.RedisError as exc:
            logger.warning("queue depth unavailable: %s", exc)
            return
        now = self.now()
        for queue, length, head, stamp in zip(self.queues, lengths, heads, stamps, strict=True):
            family.add_metric([queue], float(length))
            enqueued = _enqueued_at(stamp) if head is not None and stamp is not None else None
            oldest.add_metric([queue], max(0.0, now - enqueued) if enqueued is not None else 0.0)
        yield family
        yield oldest
        for counter, raw in ((superseded, superseded_count), (mismatches, mismatch_count)):
            try:
                counter.add_metric([], float(int(raw or 0)))
            except ValueError:  # not a number: not ours
                counter.add_metric([], 0.0)
            yield counter


class FerretMetrics:
    """Every metric a worker exports, in its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._job_metrics(self.registry)
        self._pipeline_metrics(self.registry)
        self._store_metrics(self.registry)
        self._llm_metrics(self.registry)
        self._children: dict[tuple[Any, tuple[object, ...]], Any] = {}
        self._create_children()

    def _child(self, metric: Any, *values: object) -> Any:
        """``metric.labels(*values)``, looked up once: a job records some sixteen labelled series, and
        prometheus_client checks and locks on every ``labels`` call (~3 us each)."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def _job_metrics(self, r: CollectorRegistry) -> None:
        """Jobs, queues and the worker."""
        self.jobs = Counter("ferret_jobs_total", "Jobs ended, by queue and final status.",
                            ["queue", "status"], registry=r)
        self.job_duration = Histogram("ferret_job_duration_seconds", "Job run time, start to result.",
                                      ["queue"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue_wait = Histogram("ferret_queue_wait_seconds", "Time from enqueue to start.",
                                    ["queue"], buckets=LATENCY_BUCKETS, registry=r)
        self.deadline_misses = Counter("ferret_deadline_misses_total",
                                       "Jobs that missed their deadline, queued (expired) or running (cut short).",
                                       ["phase"], registry=r)
        self.busy = Gauge("ferret_worker_busy", "1 while the worker runs a job, else 0.", registry=r)
        self.cache = Counter("ferret_cache_requests_total", "Retrieval cache look-ups by result.", ["result"],
                             registry=r)
        self.refused = Counter("ferret_refused_entries_total",
                               "Queue entries refused without running anything, by reason.", ["reason"], registry=r)

    def _pipeline_metrics(self, r: CollectorRegistry) -> None:
        """The pipeline's stages: routes, retries, replacements, decompositions, fusion, the fallback."""
        self.stage_duration = Histogram("ferret_stage_duration_seconds", "Pipeline stage run time.",
                                        ["stage"], buckets=STAGE_BUCKETS, registry=r)
        self.routes = Counter("ferret_routes_total", "Jobs by complexity route.", ["route"], registry=r)
        self.retries = Counter("ferret_retries_total", "Quality-gate reformulation retries.", registry=r)
        self.replacements_attempted = Counter(
            "ferret_replacements_attempted_total", "Replacement searches for weak results.", registry=r)
        self.replacements_successful = Counter(
            "ferret_replacements_successful_total", "Weak results replaced by a better one.", registry=r)
        self.decompositions = Counter("ferret_decompositions_total", "Jobs whose query was split.", registry=r)
        self.sub_queries = Counter("ferret_sub_queries_total", "Sub-queries searched.", registry=r)
        self.fallbacks = Counter("ferret_fallbacks_total", "The plain-search fallback after the orchestration "
                                 "failed, by outcome (ok: answered partial; failed/timeout: the job failed).",
                                 ["outcome"], registry=r)
        self.retriever_results = Counter("ferret_retriever_results_total",
                                         "Results each retriever contributed to the fused lists.",
                                         ["retriever"], registry=r)
        self.fusion_shifts = Counter("ferret_fusion_shifts_total", "Searches where a retriever's results were weak "
                                     "and it gave weight to the others.", ["retriever"], registry=r)
        self.retriever_errors = Counter("ferret_retriever_errors_total", "Graph or semantic searches that failed or "
                                        "did not answer in time (the search went on without them).", ["retriever"],
                                        registry=r)

    def _store_metrics(self, r: CollectorRegistry) -> None:
        """The memory backends, co-retrieval, the local indexes and the outside endpoints' breakers."""
        self.backend_requests = Counter("ferret_backend_requests_total", "Backend calls by outcome.",
                                        ["backend", "outcome"], registry=r)
        self.backend_latency = Histogram("ferret_backend_request_duration_seconds", "Backend call time.",
                                         ["backend"], buckets=LATENCY_BUCKETS, registry=r)
        self.co_retrieval = Counter("ferret_co_retrieval_jobs_total",
                                    "Jobs' co-retrieval strengthening by outcome (applied, failed, dropped).",
                                    ["outcome"], registry=r)
        self.co_retrieval_links = Counter("ferret_co_retrieval_links_total",
                                          "Links strengthened (nous: edges; local: memory pairs).", registry=r)
        self.index_ready = Counter("ferret_index_ready_total", "How each job's local index was made ready "
                                   "(warm, caught_up: changes applied, disk, snapshot: loaded, built: from the "
                                   "memories).", ["how"], registry=r)
        self.index_changes = Counter("ferret_index_changes_total", "Change-log entries applied to local indexes "
                                     "(staged: searchable at once, committed later).", registry=r)
        self.index_folded = Counter("ferret_index_folded_changes_total", "Staged changes committed to a local "
                                    "index, by when: on a job's path (job: backend.local.fold_changes reached) or "
                                    "after a job's result was written (after_job: fold_seconds reached).",
                                    ["when"], registry=r)
        self.index_fold_duration = Histogram("ferret_index_fold_seconds", "Time one commit of staged changes "
                                             "took, by when (job, after_job).", ["when"], buckets=STAGE_BUCKETS,
                                             registry=r)
        self.index_folds_taken = Counter("ferret_index_folds_taken_total", "Commits of staged changes taken from "
                                         "another worker's commit on this host (hard links) instead of made, by "
                                         "when (job, after_job).", ["when"], registry=r)
        self.index_evictions = Counter("ferret_index_evictions_total",
                                       "Namespaces' indexes evicted to stay within the memory bound.", registry=r)
        self.endpoint_skips = Counter("ferret_endpoint_skipped_jobs_total", "Jobs that skipped an outside endpoint "
                                      "(chat, embeddings, Nous) because its circuit was open.", ["endpoint"],
                                      registry=r)

    def _llm_metrics(self, r: CollectorRegistry) -> None:
        """The LLM stages: the re-rank and the agent loop."""
        self.rerank = Counter("ferret_rerank_total", "LLM re-rank attempts by outcome (anything but ok fell back "
                              "to the original order).", ["outcome"], registry=r)
        self.agent_runs = Counter("ferret_agent_runs_total", "Agent loop runs by outcome (ok, clarification, "
                                  "deadline: partial; fallback: the fast path's answer; disabled: asked for, off).",
                                  ["outcome"], registry=r)
        self.agent_steps = Histogram("ferret_agent_steps", "Steps an agent run took.", buckets=AGENT_STEP_BUCKETS,
                                     registry=r)
        self.agent_llm_latency = Histogram("ferret_agent_llm_duration_seconds", "One agent LLM call's time.",
                                           buckets=LATENCY_BUCKETS, registry=r)

    def _create_children(self) -> None:
        for queue in QUEUES:
            self.job_duration.labels(queue)
            self.queue_wait.labels(queue)
            for status in FINAL_STATUSES:
                self.jobs.labels(queue, status)
        for stage in STAGES:
            self.stage_duration.labels(stage)
        for route in Route:
            self.routes.labels(route.value)
        for phase in ("queued", "running"):
            self.deadline_misses.labels(phase)
        for backend in BACKENDS:
            self.backend_latency.labels(backend)
            for outcome in BACKEND_OUTCOMES:
                self.backend_requests.labels(backend, outcome)
        self.busy.set(0)
        for outcome in ("hit", "miss"):
            self.cache.labels(outcome)
        for outcome in RERANK_OUTCOMES:
            self.rerank.labels(outcome)
        for outcome in ("applied", "failed", "dropped"):
            self.co_retrieval.labels(outcome)
        for reason in REFUSAL_REASONS:
            self.refused.labels(reason)
        for outcome in FALLBACK_OUTCOMES:
            self.fallbacks.labels(outcome)
        for how in INDEX_READINESS:
            self.index_ready.labels(how)
        for when in FOLD_WHEN:
            self.index_folded.labels(when)
            self.index_fold_duration.labels(when)
            self.index_folds_taken.labels(when)
        for outcome in AGENT_OUTCOMES:
            self.agent_runs.labels(outcome)
        for retriever in RETRIEVERS:
            self.retriever_results.labels(retriever)
            self.fusion_shifts.labels(retriever)
            self.retriever_errors.labels(retriever)

    def record_fold(self, when: str, changes: int, ms: float, taken: int = 0) -> None:
        """Commits of ``changes`` staged changes that took ``ms`` (``taken`` of them a peer's), on a job's path
        or after it."""
        self.index_folded.labels(when).inc(changes)
        self.index_fold_duration.labels(when).observe(max(0.0, ms / 1000))
        self.index_folds_taken.labels(when).inc(taken)

    def observe_co_retrieval(self, outcome: str, links: int) -> None:
        self.co_retrieval.labels(outcome).inc()
        self.co_retrieval_links.inc(links)

    def watch_queues(self, client: redis.Redis, now: Callable[[], float] = time.time) -> None:
        self.registry.register(QueueDepthCollector(client, now=now))

    def watch_endpoints(self, health: EndpointHealth) -> None:
        self.registry.register(CircuitCollector(health))
        for endpoint in health.breakers:  # the endpoints configured at start-up, counted from 0
            self.endpoint_skips.labels(endpoint[:200])

    def watch_indexes(self, root: Path) -> None:
        self.registry.register(IndexBytesCollector(root))

    def record(self, result: RetrievalResult, backend: str) -> None:
        """Record one finished job. Never raises: an observer must not hurt the work."""
        try:
            self._record(result, backend)
        except Exception:
            logger.exception("job=%s recording metrics failed", result.job_id)

    def _record(self, result: RetrievalResult, backend: str) -> None:
        queue = result.queue if result.queue in QUEUES else "prefetch"
        self._child(self.jobs, queue, result.status).inc()
        stamps = result.timestamps
        if stamps.started_at is not None:
            self._child(self.queue_wait, queue).observe(max(0.0, stamps.started_at - stamps.enqueued_at))
            if stamps.finished_at is not None:
                self._child(self.job_duration, queue).observe(max(0.0, stamps.finished_at - stamps.started_at))
        if result.status == "expired":
            self._child(self.deadline_misses, "queued").inc()
        elif result.status == "partial" or (result.error or "").startswith("hard timeout"):
            self._child(self.deadline_misses, "running").inc()
        self._record_stats(result.stats, backend)

    def _record_agent(self, agent: dict[str, Any]) -> None:
        outcome = agent.get("outcome")
        if outcome not in AGENT_OUTCOMES:
            return
        self._child(self.agent_runs, outcome).inc()
        if outcome == "disabled":
            return
        steps = agent.get("steps")
        if isinstance(steps, int) and steps > 0:
            self.agent_steps.observe(steps)
        for ms in agent.get("llm_ms") or []:
            if isinstance(ms, (int, float)):
                self.agent_llm_latency.observe(max(0.0, ms / 1000))

    def _record_fusion(self, fusion: dict[str, Any]) -> None:
        for retriever, count in (fusion.get("contributed") or {}).items():
            if retriever in RETRIEVERS and isinstance(count, int) and count > 0:
                self._child(self.retriever_results, retriever).inc(count)
        for shifts in fusion.get("shifts") or []:
            for retriever in shifts if isinstance(shifts, dict) else ():
                if retriever in RETRIEVERS:
                    self._child(self.fusion_shifts, retriever).inc()
        for retriever, count in (fusion.get("errors") or {}).items():
            if retriever in RETRIEVERS and isinstance(count, int) and count > 0:
                self._child(self.retriever_errors, retriever).inc(count)

    def _record_stats(self, stats: JobStats, backend: str) -> None:
        for endpoint in stats.circuit_open or []:
            self._child(self.endpoint_skips, endpoint[:200]).inc()
        if stats.cache_hit is not None:
            self._child(self.cache, "hit" if stats.cache_hit else "miss").inc()
        for stage, ms in (stats.stage_ms or {}).items():
            if stage in STAGES:
                self._child(self.stage_duration, stage).observe(ms / 1000)
        if stats.cache_hit:  # served from the cache: the pipeline did not run
            return
        if stats.index in INDEX_READINESS:
            self._child(self.index_ready, stats.index).inc()
        self.index_changes.inc(stats.index_changes or 0)
        if stats.index_folded:
            self.record_fold("job", stats.index_folded, stats.index_fold_ms or 0.0, int(bool(stats.index_fold_taken)))
        self.index_evictions.inc(stats.index_evictions or 0)
        if stats.fallback in FALLBACK_OUTCOMES:
            self._child(self.fallbacks, stats.fallback).inc()
        if stats.agent is not None:
            self._record_agent(stats.agent)
        if stats.fusion is not None:
            self._record_fusion(stats.fusion)
        if stats.route in Route.__members__:
            self._child(self.routes, stats.route).inc()
        self.retries.inc(stats.retries or 0)
        self.replacements_attempted.inc(stats.replacements_attempted or 0)
        self.replacements_successful.inc(stats.replacements_successful or 0)
        if stats.was_decomposed:
            self.decompositions.inc()
        if stats.rerank in RERANK_OUTCOMES:
            self._child(self.rerank, stats.rerank).inc()
        self.sub_queries.inc(len(stats.sub_queries or []))
        name = backend if backend in BACKENDS else "local"
        for _operation, outcome, seconds in stats.backend_calls or []:
            self._child(self.backend_requests, name, outcome if outcome in BACKEND_OUTCOMES else "error").inc()
            self._child(self.backend_latency, name).observe(seconds)
