"""A flood of one known condition is a line per window with a count; other kinds are said at once."""

from __future__ import annotations

import logging

from ferret.repeated_lines import RepeatedLines


def test_one_line_per_window_then_the_count(caplog):
    now = [0.0]
    lines = RepeatedLines(logging.getLogger("flood"), window=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="flood"):
        assert lines.warning("junk", "refused %s", 1)
        for n in range(2, 101):
            now[0] += 0.05
            assert not lines.warning("junk", "refused %s", n)
        assert lines.warning("other", "another kind %s", 1)  # its own window
        now[0] = 12.0
        assert lines.warning("junk", "refused %s", 101)
        assert not lines.warning("junk", "refused %s", 102)
        lines.say_held_back()
    said = [record.getMessage() for record in caplog.records]
    assert said == ["refused 1", "another kind 1", "refused 101 (and 99 more like it in the last 12 s, not logged)",
                    "1 more junk, not logged"]
