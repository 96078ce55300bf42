from ferret.ingest import parse_memory_lines


def test_malformed_lines_never_lose_good_ones():
    lines = [
        '{"id": "a", "content_title": "good one"}',
        '{"id": "b", "content_title": ',  # truncated JSON
        '[1, 2]',
        '{"content_title": "no id"}',
        '{"id": "c"}',  # no text at all
        '',
        '{"id": "d", "content_body": "good two", "cluster_ids": ["x"]}',
        '{"id": "e\\u0000", "content_title": "nul in id"}',
    ]
    memories, errors = parse_memory_lines(lines)
    assert [m.id for m in memories] == ["a", "d"]
    assert [e.line for e in errors] == [2, 3, 4, 5, 8]
    assert "not valid JSON" in str(errors[0]) and "line 2" in str(errors[0])
    assert errors[2].error.field == "id"
    assert "content_title" in str(errors[3])


def test_a_lone_surrogate_is_refused_by_line_and_field():
    # JSON escapes can carry half a surrogate pair; stored, it would break every result that holds it
    lines = [
        '{"id": "a", "content_title": "BTC", "content_body": "half a pair \\udc80"}',
        '{"id": "b", "content_title": "SOL", "cluster_ids": ["\\ud800"]}',
        '{"id": "c", "content_title": "a whole pair \\ud83d\\ude00"}',
    ]
    memories, errors = parse_memory_lines(lines)
    assert [m.id for m in memories] == ["c"]
    assert [(e.line, e.error.field) for e in errors] == [(1, "content_body"), (2, "cluster_ids")]
    assert "lone surrogate" in str(errors[0])


def test_terminal_control_characters_are_refused_by_line_and_field():
    lines = [
        '{"id": "a", "content_title": "BTC", "content_body": "red \\u001b[31mtext"}',
        '{"id": "b", "content_title": "bell \\u0007"}',
        '{"id": "c", "content_summary": "csi \\u009b2J", "content_title": "x"}',
        '{"id": "d", "content_title": "tabs\\tand\\nnewlines are fine"}',
        '{"id": "e", "content_title": "SOL", "cluster_ids": ["ok", "\\u001b]0;title\\u0007"]}',
    ]
    memories, errors = parse_memory_lines(lines)
    assert [m.id for m in memories] == ["d"]
    assert [(e.line, e.error.field) for e in errors] == [(1, "content_body"), (2, "content_title"),
                                                          (3, "content_summary"), (5, "cluster_ids")]
    assert "U+001B at character 4" in str(errors[0]) and "line 1: content_body" in str(errors[0])
