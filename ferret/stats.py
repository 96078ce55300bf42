"""What a job did, as its result's ``stats`` carries it: one typed record.

Every field is optional and a job records what applies to it: a job that
ran the pipeline has the pipeline's counters and timings, a cache hit has
``cache_hit`` and the cached run's counters. (``refused`` is only read:
results of earlier versions carry it; a refusal now writes no result.) The
stored JSON leaves out what is unset, so readers of results see the same
documents as before this record existed. Unknown keys in a
stored document (older versions) are ignored on reading.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# Why a queue entry was not run (``JobStats.refused``; the labels of ferret_refused_entries_total).
REFUSAL_REASONS = ("bad_id", "no_job_hash", "malformed_job", "data_too_large", "not_ferret_job", "bad_arguments",
                   "tenant_mismatch", "bad_signature")


class JobStats(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    # The plan (classify, decompose, complexity).
    complexity_score: float | None = None
    route: str | None = None  # SIMPLE | MODERATE | COMPLEX | AMBIGUOUS | TRIVIAL
    complexity_factors: dict[str, float] | None = None  # query_type, entity_count, subquestion_count, ...
    complexity_override: str | None = None  # meta | ambiguous
    trivial: str | None = None  # empty | trivial: a message with nothing to search got no search
    timestamp_stripped: bool | None = None  # a leading timestamp was stripped before retrieval
    references_resolved: int | None = None  # references ("it", "the other one") resolved from the history
    rewritten_query: str | None = None  # the query they were resolved into (unless query text is not recorded)
    query_type: str | None = None
    disqualifiers: list[str] | None = None
    intents: list[str] | None = None
    was_decomposed: bool | None = None
    decomposition_strategy: str | None = None
    sub_queries: list[str] | None = None
    # The searches and what followed.
    retries: int | None = None
    # Sub-queries (by index) whose search and retry found nothing, and how many of them one more try
    # filled (the semantic retriever, else the words beginning with theirs): ferret.worker.pipeline.orchestrator.
    empty_parts: list[int] | None = None
    empty_parts_filled: int | None = None
    replacements_attempted: int | None = None
    replacements_successful: int | None = None
    sub_query_errors: int | None = None
    sub_query_timeouts: int | None = None
    remote_classifier: str | None = None
    candidates: int | None = None
    context_tokens: int | None = None
    rerank: str | None = None  # off | ok | disabled | deadline | too_few | timeout | error | malformed | circuit_open
    circuit_open: list[str] | None = None  # outside endpoints this job skipped: their circuit was open
    stage_ms: dict[str, float] | None = None
    skipped_stages: list[str] | None = None
    backend_calls: list[tuple[str, str, float]] | None = None  # (operation, outcome, seconds)
    # Seed 000's last resort: one plain search of the question when the orchestration failed.
    fallback: str | None = None  # ok | failed | timeout
    fallback_cause: str | None = None  # why the orchestration could not answer
    # Weighted fusion of retrievers (seed 002): weights (lexical, graph, semantic) and override, the
    # retrievers run and skipped, per sub-query the weights after the shifts and the shifts, how many
    # results each retriever contributed, sub-queries where every retriever was weak, retriever errors.
    fusion: dict[str, Any] | None = None
    # The local backend's index for this job (ferret.worker.backends.index_registry).
    index: str | None = None  # warm | caught_up | disk | snapshot | shared | built
    index_changes: int | None = None  # change-log entries applied before the search (staged: no commit)
    index_staged: int | None = None  # changes searchable from memory, not yet committed to the index
    index_folded: int | None = None  # staged changes committed on this job's path (backend.local.fold_changes)
    index_fold_ms: float | None = None  # how long that commit took
    index_fold_taken: bool | None = None  # that commit was another worker's on this host, taken (no commit made)
    index_evictions: int | None = None  # namespaces evicted to stay within the memory bound
    # The agent loop (seed 002), when it ran: outcome (ok | clarification | deadline | fallback | disabled),
    # steps, parallel_steps, backtracked, reflection_concluded, forced_conclusion, llm_calls, llm_answers
    # (calls the model answered), llm_ms, reason.
    agent: dict[str, Any] | None = None
    # The job around the pipeline.
    cache_hit: bool | None = None
    refused: str | None = None  # read from earlier versions' results only: a refusal now writes none
    truncated: bool | None = None  # the result was cut to fit limits.max_result_bytes
    superseded_by: str | None = None  # a conversation's newer prefetch took this one off the queue: not run

    def to_json(self) -> dict[str, Any]:
        """The stored form: only what is set."""
        return self.model_dump(mode="json", exclude_none=True)

    def with_(self, **changes: Any) -> JobStats:
        """A copy with ``changes`` (validated)."""
        return JobStats.model_validate({**self.model_dump(exclude_none=True), **changes})
