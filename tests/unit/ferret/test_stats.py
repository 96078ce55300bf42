from ferret.contract import RetrievalResult, Timestamps
from ferret.stats import JobStats


def _result(stats: JobStats) -> RetrievalResult:
    return RetrievalResult(job_id="j", namespace="n", queue="prefetch", status="failed", stats=stats,
                           timestamps=Timestamps(enqueued_at=0, deadline_at=1))


def test_the_stored_document_holds_only_what_the_job_recorded():
    assert _result(JobStats(refused="bad_id")).model_dump(mode="json")["stats"] == {"refused": "bad_id"}
    assert _result(JobStats()).model_dump(mode="json")["stats"] == {}


def test_stored_documents_read_back_typed_and_older_keys_are_ignored():
    stored = _result(JobStats(retries=1, backend_calls=[("search", "ok", 0.01)])).model_dump_json()
    again = RetrievalResult.model_validate_json(stored)
    assert again.stats.retries == 1 and again.stats.backend_calls == [("search", "ok", 0.01)]
    older = RetrievalResult.model_validate({**_result(JobStats()).model_dump(), "stats": {"co_retrieval_amount": 0.03}})
    assert older.stats == JobStats()


def test_with_returns_a_validated_copy():
    stats = JobStats(retries=2)
    assert stats.with_(truncated=True) == JobStats(retries=2, truncated=True) and stats.truncated is None
