"""The progress display of warren pipeline (warren/spark/jobs/progress.py): a redrawn line with a
bar on a terminal, throttled plain lines elsewhere, and a summary."""

from __future__ import annotations

import io

from warren.spark.jobs.progress import PLAIN_EVERY, Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_are_throttled_and_end_with_a_summary():
    out, clock = io.StringIO(), Clock()
    p = Progress("archived", "lag", stream=out, terminal=False, clock=clock)
    clock.now += 2
    p.update(1000, 9000)
    p.update(2000, 8000)  # within PLAIN_EVERY of the last line: not written
    clock.now += PLAIN_EVERY
    p.update(3000, 7000)
    clock.now += PLAIN_EVERY
    p.update(3000, 7000)  # nothing changed: not written
    p.finish("archived 3,000 rows")
    lines = out.getvalue().splitlines()
    assert lines[0] == "archived: 1,000 rows, 500 rows/s, lag 9,000"
    assert lines[1].startswith("archived: 3,000 rows, ") and lines[1].endswith("lag 7,000")
    assert len(lines) == 3 and lines[2].startswith("archived 3,000 rows in 12.0 s (250 rows/s)")
    assert "\r" not in out.getvalue()


def test_a_terminal_gets_one_redrawn_line_with_a_bar():
    out, clock = io.StringIO(), Clock()
    p = Progress("published", "left", stream=out, terminal=True, clock=clock)
    clock.now += 1
    p.update(250, 750)
    p.update(500, 500)
    p.finish("published 1,000 rows")
    text = out.getvalue()
    assert text.count("\r\033[K") == 3 and text.count("\n") == 1
    assert "[############............] published: 500 rows, 500 rows/s, left 500" in text
    assert text.endswith("published 1,000 rows in 1.0 s (500 rows/s)\n")


def test_unknown_lag_is_left_out():
    out = io.StringIO()
    p = Progress("archived", stream=out, terminal=False, clock=Clock())
    p.update(0, None)
    assert out.getvalue() == "archived: 0 rows, 0 rows/s\n"
