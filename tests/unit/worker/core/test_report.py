from ferret.contract import RetrievalResult, Timestamps
from ferret.worker.core.report import JobReport, after_job


def test_a_failing_observer_neither_raises_nor_stops_the_others(caplog):
    heard = []

    def broken(report: JobReport) -> None:
        raise RuntimeError("observer bug")

    result = RetrievalResult(job_id="j", namespace="n", queue="prefetch", status="ok",
                             timestamps=Timestamps(enqueued_at=0, deadline_at=1))
    after_job([broken, heard.append], JobReport(result, None))
    assert [r.result.job_id for r in heard] == ["j"]
    assert "observer broken failed" in caplog.text
