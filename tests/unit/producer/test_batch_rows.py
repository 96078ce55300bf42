"""A batch output line: the row's own fields, then the result's, as one compact JSON object in UTF-8 that reads
back as the row and the result's JSON form (the result is dumped from the model, never through a dict)."""

import io
import json
import time

from hypothesis import example, given
from hypothesis import strategies as st

from ferret.contract import RetrievalResult, Timestamps
from ferret.producer.batch import _write


def test_a_result_line_reads_back_as_the_row_then_the_result():
    result = RetrievalResult(job_id="fr-r-1", namespace="alice", queue="batch", status="ok",
                             context="- [event] Dîner avec Anna (2026-03-14): à 20 h", stats={"retries": 1},
                             timestamps=Timestamps(enqueued_at=1.5, deadline_at=2.5))
    out = io.BytesIO()
    _write(out, {"line": 7, "reused": True}, result)
    line = out.getvalue().decode()
    assert line.endswith("\n") and line.count("\n") == 1 and "Dîner" in line  # UTF-8, not escaped
    assert json.loads(line) == {"line": 7, "reused": True, **result.model_dump(mode="json")}
    assert list(json.loads(line))[:3] == ["line", "reused", "job_id"]


def test_a_row_without_a_result_is_written_as_it_is():
    out = io.BytesIO()
    _write(out, {"line": 3, "status": None, "error": "forged"})
    assert out.getvalue() == b'{"line":3,"status":null,"error":"forged"}\n'


rows = st.dictionaries(st.text(max_size=8), st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                       | st.text(st.characters(exclude_categories=[])),
                       max_size=5)


@given(rows)
@example({"error": "a\ud800b"})
@example({"error": "\x00\x1f\x7f \u2028 \"q\" \\ é"})
def test_a_row_is_what_the_standard_library_writes(row):
    """Any text (control characters, U+2028, a lone surrogate: the standard library's form, which the UTF-8 file
    then refuses as before) is written as ``json.dumps`` compact, not ASCII-escaped, writes it."""
    out = io.BytesIO()
    try:
        expected = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except UnicodeEncodeError:
        expected = None
    try:
        _write(out, row)
    except UnicodeEncodeError:
        assert expected is None
        return
    assert out.getvalue() == expected


def test_redis_out_of_reach_at_the_end_of_one_jobs_stall_wait_does_not_end_the_batch(monkeypatch):
    """The stall check waits a few seconds for the oldest job; Redis out of reach at its end is that wait's
    error, not the batch's: the batch waits on, until its own --wait is up, and writes the result."""
    from types import SimpleNamespace

    import fakeredis

    from ferret.errors import RedisUnreachable
    from ferret.producer import batch
    from ferret.producer.client import JobHandle

    monkeypatch.setattr(batch, "STALL_SECONDS", 0.05)
    monkeypatch.setattr(batch, "POLL_SECONDS", 0.01)
    result = RetrievalResult(job_id="fr-r-9", namespace="alice", queue="batch", status="ok",
                             timestamps=Timestamps(enqueued_at=1.0, deadline_at=2.0))
    waits = []

    def wait(handle, timeout):
        waits.append(timeout)
        if len(waits) == 1:
            raise RedisUnreachable("Redis was out of reach for the last 0 s of the 5 s waited for job fr-r-9")
        return result

    producer = SimpleNamespace(client=fakeredis.FakeRedis(), wait=wait,
                               results_of=lambda handles: [None] * len(handles),
                               settings=SimpleNamespace(redis=SimpleNamespace(failover_check_seconds=2.0)))
    out, summary = io.BytesIO(), batch.BatchSummary(run="r")
    with batch._Collector(producer, out, summary, batch.NoProgress()) as collector:
        collector.expect(1, JobHandle("fr-r-9", "batch", "alice", "line-1", "t"), False)
        collector.finish(time.monotonic() + 30)
    assert len(waits) == 2 and summary.by_status["ok"] == 1 and summary.unfinished == 0
    assert json.loads(out.getvalue())["job_id"] == "fr-r-9"
