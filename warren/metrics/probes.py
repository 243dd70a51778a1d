"""What only the running process can measure: event-loop lag, GC pauses, store sync latency.

Each probe records into a ``Histogram``: fixed bucket bounds, one list index increment per
observation, read at scrape time (the Prometheus histogram's cumulative ``_bucket`` series are
made then, not per observation).

* ``LoopLagProbe``: a timer every ``LAG_INTERVAL_S`` notes how late the loop ran it. A callback
  that holds the loop (a long full GC, a slow request) shows as lag of the next tick.
* ``GcPauseProbe``: ``gc.callbacks`` time every collection, per generation. CPython calls them
  at the start and the end of each pass, a young pass every 10,000 allocations or so
  (collector.py): two calls of a few hundred nanoseconds each.
* The store's group commit (``Server._start_sync``) observes each sync's duration into a
  ``Histogram`` the server owns (``SYNC_BUCKETS``).
"""

from __future__ import annotations

import bisect
import gc
import time

__all__ = ["Histogram", "LoopLagProbe", "GcPauseProbe", "LAG_BUCKETS", "GC_BUCKETS", "SYNC_BUCKETS"]

LAG_INTERVAL_S = 0.25
# seconds; the lag a healthy loop shows is well under a millisecond
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
GC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# an fsync on an SSD takes 0.1–2 ms, on a disk or a busy VM tens of milliseconds
SYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Histogram:
    """Observations counted per bucket (non-cumulative; ``cumulative`` makes Prometheus' form)."""

    __slots__ = ("bounds", "counts", "sum", "count", "last")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0
        self.last = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1
        self.last = value

    def merged(self, other: Histogram) -> Histogram:
        """A new histogram with the observations of both (same bounds: another worker's)."""
        out = Histogram(self.bounds)
        out.counts = [a + b for a, b in zip(self.counts, other.counts)]
        out.sum = self.sum + other.sum
        out.count = self.count + other.count
        out.last = self.last
        return out

    def cumulative(self) -> list[tuple[float, int]]:
        """[(upper bound, observations <= it)], ending with (inf, count)."""
        out = []
        running = 0
        for bound, n in zip(self.bounds + (float("inf"),), self.counts):
            running += n
            out.append((bound, running))
        return out


class LoopLagProbe:
    """How late the event loop runs a timer: the time callbacks keep it from its work."""

    def __init__(self, loop, interval: float = LAG_INTERVAL_S) -> None:
        self.loop = loop
        self.interval = interval
        self.histogram = Histogram(LAG_BUCKETS)
        self.max_since_scrape = 0.0  # the largest lag since the last scrape read it
        self._due = 0.0
        self._handle = None

    def start(self) -> None:
        self._due = self.loop.time() + self.interval
        self._handle = self.loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = self.loop.time()
        lag = max(0.0, now - self._due)
        self.histogram.observe(lag)
        if lag > self.max_since_scrape:
            self.max_since_scrape = lag
        self._due = now + self.interval
        self._handle = self.loop.call_at(self._due, self._tick)

    def take_max(self) -> float:
        """The largest lag since the last call (a scrape), then start again."""
        value, self.max_since_scrape = self.max_since_scrape, 0.0
        return value


class GcPauseProbe:
    """Every garbage collection's duration, per generation (0, 1, 2)."""

    def __init__(self) -> None:
        self.histograms = [Histogram(GC_BUCKETS) for _ in range(3)]
        self.collected = [0, 0, 0]  # unreachable objects found, per generation
        self._started = 0.0
        self._installed = False

    def start(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True

    def stop(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            generation = info["generation"]
            self.histograms[generation].observe(time.perf_counter() - self._started)
            self.collected[generation] += info["collected"]
