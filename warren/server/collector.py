"""When the broker runs CPython's full garbage collections.

Why: CPython runs a full (generation 2) collection each time the objects that survived the
young collections have grown by a quarter since the last one, and a full pass visits every
tracked object. A broker's long-lived objects are mostly queued messages (a ``Message`` and
its queue entry each), which never form reference cycles, yet while a backlog grows they
are visited again and again: in ``bench/pipeline.py pubonly`` these passes were 20–25 % of the
CPU per published message (9.2 µs with them, 7.3 µs without), and one pass over 1 million
queued messages takes about 270 ms.

What instead: the young generations are still collected automatically, a little less often
(``YOUNG_THRESHOLD``), so cycles among short-lived objects (a failed publish's traceback, a
channel opened and closed at once) are found as before. Automatic full passes are off, and
the server's tick asks ``Collector.due`` whether to run one:

* every ``INTERVAL`` seconds, since long-lived cyclic garbage (closed connections, their
  channels and consumers, deleted queues) must not wait for ever, or sooner once
  ``CLOSES`` connections have closed since the last pass (a burst of them is the one source
  of much of it);
* never so often that full passes take more than ``DUTY`` of the time: a pass that took
  270 ms waits 13.5 s for the next.

Memory held by cyclic garbage is therefore bounded by what ``CLOSES`` connections or
``INTERVAL`` seconds leave behind, and CPU in full passes by ``DUTY``, whatever the backlog.

What the broker made while starting (modules, classes, functions, the protocol tables: about
45,000 objects) lives as long as the process and is never garbage, yet every full pass visited
it again: 10 ms per pass on a quiet machine, 18–25 ms on a loaded one, during which nothing is
read or delivered (a latency stall every ``INTERVAL`` seconds; docs/performance.md).
``freeze_startup`` moves it out of the collector's sight once the broker is up (``gc.freeze``:
a permanent generation that passes skip), so a pass visits only what clients made.
"""

from __future__ import annotations

import gc
import logging
import time

__all__ = ["Collector", "tune_young_collections"]

log = logging.getLogger("warren.gc")

YOUNG_THRESHOLD = (10_000, 10)  # allocations per young pass, young passes per middle pass
NEVER = 2**31 - 1  # a full-pass threshold that is never reached
INTERVAL = 10.0  # seconds between full passes at most (unless DUTY forbids)
CLOSES = 100  # closed connections that call for a full pass sooner
MIN_GAP = 1.0  # seconds between full passes at least
DUTY = 0.02  # largest share of the time spent in full passes
SLOW_PASS = 0.1  # a full pass longer than this (seconds) is logged


def tune_young_collections() -> None:
    """Young passes only; full passes are left to ``Collector``. Process-wide."""
    gc.set_threshold(YOUNG_THRESHOLD[0], YOUNG_THRESHOLD[1], NEVER)


class Collector:
    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.last = clock()  # when the last full pass ended
        self.last_duration = 0.0
        self.closes = 0  # connections closed since the last full pass
        self.passes = 0
        self.frozen = 0  # objects made while starting, out of every pass's sight (freeze_startup)

    def connection_closed(self) -> None:
        self.closes += 1

    def due(self, now: float) -> bool:
        since = now - self.last
        if since < max(MIN_GAP, self.last_duration / DUTY):
            return False
        return since >= INTERVAL or self.closes >= CLOSES

    def collect(self) -> int:
        started = self.clock()
        found = gc.collect()
        self.last = self.clock()
        self.last_duration = self.last - started
        self.closes = 0
        self.passes += 1
        if self.last_duration > SLOW_PASS:
            log.info("full garbage collection took %.0f ms (%d unreachable objects)",
                     self.last_duration * 1000, found)
        return found

    def freeze_startup(self) -> int:
        """Once the broker is up, before any client: collect what starting left as garbage, then
        freeze everything left (``gc.freeze``) so that no later pass visits it. Returns how many
        objects were frozen."""
        gc.collect()
        gc.freeze()
        self.frozen = gc.get_freeze_count()
        return self.frozen

    def stats(self) -> dict:
        """For /api/overview: how often and how long full passes ran."""
        return {"full_passes": self.passes, "last_full_pass_ms": round(self.last_duration * 1000, 1),
                "connections_closed_since": self.closes, "thresholds": list(gc.get_threshold()),
                "frozen_at_startup": self.frozen}

    def tick(self, now: float) -> None:
        if self.due(now):
            self.collect()
