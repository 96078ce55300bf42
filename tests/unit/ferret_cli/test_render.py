from ferret.cli.render import to_text, waterfall


def test_waterfall_indents_children_and_shows_durations():
    ms = 1_000_000
    trace = {"trace_id": "t", "spans": [
        {"name": "job", "span_id": "1", "parent_span_id": None, "start_time_unix_nano": 0,
         "end_time_unix_nano": 10 * ms, "duration_ms": 10.0, "attributes": {}, "status": "OK"},
        {"name": "search", "span_id": "2", "parent_span_id": "1", "start_time_unix_nano": 2 * ms,
         "end_time_unix_nano": 6 * ms, "duration_ms": 4.0, "attributes": {"index": 1}, "status": "ERROR"},
    ]}
    lines = [line.rstrip() for line in to_text(waterfall(trace)).splitlines()]
    assert lines[0] == "trace t  total 10.00 ms"
    assert lines[1].startswith("job ") and "10.00 ms" in lines[1]
    assert lines[2].startswith("  search[1]") and "4.00 ms" in lines[2] and lines[2].endswith("!")
    bars = [line[line.index(" ms ") + 4:] for line in lines[1:]]
    job_bar, search_bar = (bar.rstrip(" !") for bar in bars)
    assert len(job_bar.strip()) == 40  # the whole axis
    assert job_bar.index(search_bar.strip()[0]) < search_bar.index(search_bar.strip()[0])  # starts later
    assert len(search_bar.strip()) < len(job_bar.strip()) // 2 + 2  # 4 of 10 ms


def _result(rows):
    from ferret.contract import ResultItem, RetrievalResult, Timestamps

    items = [ResultItem(id=f"m{n}", score=score, original_score=score, section="EPISODIC", subtype=None,
                        sub_query=part, sub_query_text=None, title=f"t{n}", preview="p", date=None)
             for n, (score, part) in enumerate(rows)]
    return RetrievalResult(job_id="j", namespace="n", queue="prefetch", status="ok", results=items,
                           timestamps=Timestamps(enqueued_at=0, deadline_at=1))


def test_an_interleaved_table_says_why_its_scores_are_not_sorted():
    from ferret.cli.render import results_table

    interleaved = results_table(_result([(0.9, 0), (0.5, 1), (0.8, 0), (0.4, 1)]))
    assert "take turns" in str(interleaved.caption)
    assert results_table(_result([(0.9, 0), (0.8, 0)])).caption is None
