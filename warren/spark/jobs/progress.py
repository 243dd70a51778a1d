"""Progress of a ``warren pipeline`` job a person can follow: rows, rows/s and what is left.

On a terminal one line is redrawn in place (a bar when the total is known: archived rows over
archived + lag); elsewhere (a log file, a pipe, CI) plain lines are written, at most one every
``PLAIN_EVERY`` seconds and whenever the figures change after that, so logs stay short. Both
end with a summary line. The output stream is stderr by default: stdout keeps what a script
may parse (replay's final ``published N messages`` line).
"""

from __future__ import annotations

import sys
import time

__all__ = ["Progress", "PLAIN_EVERY"]

PLAIN_EVERY = 5.0  # seconds between plain progress lines
BAR_WIDTH = 24


def _count(n: float) -> str:
    return f"{n:,.0f}"


class Progress:
    """``update(rows, left)`` while a job runs, ``finish(text)`` at the end.

    ``rows``: rows done so far; ``left``: rows still to do (the lag behind the stream's tail
    for an archive, rows not yet published for a replay), None when unknown.
    """

    def __init__(self, what: str, left_label: str = "lag", stream=None, terminal: bool | None = None,
                 clock=time.monotonic) -> None:
        self.what = what
        self.left_label = left_label
        self.out = stream if stream is not None else sys.stderr
        self.terminal = self.out.isatty() if terminal is None else terminal
        self.clock = clock
        self.started = clock()
        self.rows = 0
        self.left: int | None = None
        self._last_plain = float("-inf")
        self._last_figures: tuple | None = None
        self._drawn = False

    def rate(self) -> float:
        elapsed = self.clock() - self.started
        return self.rows / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        parts = [f"{self.what}: {_count(self.rows)} rows", f"{_count(self.rate())} rows/s"]
        if self.left is not None:
            parts.append(f"{self.left_label} {_count(self.left)}")
        text = ", ".join(parts)
        if self.terminal and self.left is not None:
            total = self.rows + self.left
            done = int(BAR_WIDTH * self.rows / total) if total else BAR_WIDTH
            text = f"[{'#' * done}{'.' * (BAR_WIDTH - done)}] " + text
        return text

    def update(self, rows: int, left: int | None = None) -> None:
        self.rows, self.left = rows, left
        if self.terminal:
            self.out.write("\r\033[K" + self.line())
            self.out.flush()
            self._drawn = True
            return
        now = self.clock()
        figures = (rows, left)
        if now - self._last_plain >= PLAIN_EVERY and figures != self._last_figures:
            self.out.write(self.line() + "\n")
            self.out.flush()
            self._last_plain, self._last_figures = now, figures

    def finish(self, summary: str) -> None:
        if self._drawn:
            self.out.write("\r\033[K")
        elapsed = self.clock() - self.started
        self.out.write(f"{summary} in {elapsed:.1f} s ({_count(self.rate())} rows/s)\n")
        self.out.flush()
