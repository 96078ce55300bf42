from ferret.contract import RetrievalResult, Timestamps
from ferret.records import Hit, Memory
from ferret.worker.results_builder import fit_result, result_items


def _result(n: int) -> RetrievalResult:
    hits = [Hit.of(Memory(id=f"m{i}", content_body="word " * 200), 0.5) for i in range(n)]
    return RetrievalResult(job_id="j", namespace="n", queue="prefetch", status="ok",
                           results=result_items(hits, ["q"]), context="c" * 20_000, stats={"retries": 0},
                           timestamps=Timestamps(enqueued_at=1, deadline_at=2))


def test_small_results_are_untouched():
    result = _result(2)
    fitted, body = fit_result(result, 1_000_000)
    assert fitted is result and body == result.model_dump_json().encode()


def test_large_results_are_trimmed_to_the_limit_and_marked():
    result = _result(40)
    fitted, body = fit_result(result, 10_000)
    assert body == fitted.model_dump_json().encode() and len(body) <= 10_000
    assert fitted.stats.truncated is True and 0 < len(fitted.results) < 40
    assert [r.id for r in fitted.results] == [r.id for r in result.results[: len(fitted.results)]]
