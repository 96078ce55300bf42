"""A batch output line: the row's own fields, then the result's, as one compact JSON object that reads back
as the row and the result's JSON form (the result is dumped by pydantic's core, never through a dict)."""

import io
import json

from ferret.contract import RetrievalResult, Timestamps
from ferret.producer.batch import _write


def test_a_result_line_reads_back_as_the_row_then_the_result():
    result = RetrievalResult(job_id="fr-r-1", namespace="alice", queue="batch", status="ok",
                             context="- [event] Dîner avec Anna (2026-03-14): à 20 h", stats={"retries": 1},
                             timestamps=Timestamps(enqueued_at=1.5, deadline_at=2.5))
    out = io.StringIO()
    _write(out, {"line": 7, "reused": True}, result)
    line = out.getvalue()
    assert line.endswith("\n") and line.count("\n") == 1 and "Dîner" in line  # UTF-8, not escaped
    assert json.loads(line) == {"line": 7, "reused": True, **result.model_dump(mode="json")}
    assert list(json.loads(line))[:3] == ["line", "reused", "job_id"]


def test_a_row_without_a_result_is_written_as_it_is():
    out = io.StringIO()
    _write(out, {"line": 3, "status": None, "error": "forged"})
    assert out.getvalue() == '{"line":3,"status":null,"error":"forged"}\n'
