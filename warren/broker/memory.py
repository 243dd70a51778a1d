"""What Warren holds in memory: the paging budget and the memory alarm's accounting.

Three figures, in octets (docs/flow-control.md has the whole design):

* **queued**: the queues' ready messages in memory (bodies plus ``MESSAGE_OVERHEAD`` each for
  the Python objects). Past the **budget** (``limit``) queues page their tails out to disk.
* **held**: queued, plus the messages delivered to consumers and not yet acked, plus the
  connections' buffers (``buffers``, measured by the server once a second). This is what the
  memory alarm compares with the watermark.
* **unaccounted**: what the process holds beyond ``held`` (the interpreter, every other
  object, allocator retention): the server measures resident size minus held once a second
  (``note_resident``). The alarm fires when ``held`` passes the watermark minus unaccounted,
  which is resident size passing the watermark, but measured where bytes are added rather
  than once a second; the unaccounted part never takes more than three quarters of the
  watermark, so memory the allocator keeps after a queue is deleted cannot hold the alarm on:
  once Warren no longer holds the memory, ``held`` falls and the alarm clears.

Hot path: a queue taking a message adds its size to ``unchecked`` and calls ``check`` when it
passes ``check_every`` (an increment and a comparison per message). ``check`` sums the queues
(lazy accounting: nothing is counted where messages leave), pages out past the budget, and
before the alarm fires pages out everything it can: the alarm is for memory paging cannot free.
"""

from __future__ import annotations

import os

__all__ = ["MemoryBudget", "default_budget", "MESSAGE_OVERHEAD"]

# octets of Python objects per queued message besides its body (Message, ready entry, seq,
# body object): bench/memory.py measured 330 (transient) and 349 (persistent) with 16 B bodies
MESSAGE_OVERHEAD = 350
CHECK_EVERY_MAX = 1 << 20  # octets taken in between two checks, at most
CHECK_EVERY_MIN = 32 << 10
CLEAR_RATIO = 0.9  # the alarm clears below this share of its threshold (hysteresis)
UNACCOUNTED_MAX = 0.75  # share of the watermark the unaccounted memory may take from held


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 5 << 30


def default_budget(watermark: int = 0) -> int:
    """Queues page to disk past half the memory watermark (RabbitMQ's paging ratio, 0.5), and
    past a fifth of physical memory at most."""
    fifth = physical_memory() // 5
    return min(fifth, watermark // 2) if watermark else fifth


class MemoryBudget:
    def __init__(self, limit: int, queues, watermark: int = 0) -> None:
        self.limit = limit  # the paging budget, octets queued in memory (0 = never page)
        self._queues = queues  # a callable returning every queue
        self.unchecked = 0  # octets taken in since the last check (Queue.publish adds to it)
        self.check_every = CHECK_EVERY_MAX
        self.buffers = 0  # octets in connection buffers (the server measures them)
        self.unaccounted = 0  # resident octets beyond held (the server measures them)
        self.held = 0  # at the last check
        self.alarmed = False
        self.on_alarm = None  # called with (raised: bool, detail: str) when the alarm changes
        self.watermark = 0
        self.set_watermark(watermark)

    def set_watermark(self, watermark: int, on_alarm=None) -> None:
        """The memory alarm's limit in octets (0 = no alarm) and who hears about it."""
        self.watermark = watermark
        if on_alarm is not None:
            self.on_alarm = on_alarm
        smallest = min(x for x in (self.limit, watermark, CHECK_EVERY_MAX * 64) if x)
        self.check_every = max(CHECK_EVERY_MIN, min(CHECK_EVERY_MAX, smallest // 64))

    # --- measures ------------------------------------------------------------------------

    def used(self) -> int:
        """Octets queued in memory (ready messages and their objects)."""
        return sum(q.ready_bytes + len(q.ready) * MESSAGE_OVERHEAD for q in self._queues())

    def unacked(self) -> int:
        """Octets delivered to consumers and waiting for their ack."""
        return sum(c.unacked_bytes + c.unacked * MESSAGE_OVERHEAD for q in self._queues() for c in q.consumers)

    def over(self) -> bool:
        return bool(self.limit) and self.used() > self.limit

    def threshold(self) -> int:
        """``held`` above this raises the alarm: the watermark less what Warren does not account."""
        w = self.watermark
        return w - min(self.unaccounted, int(w * UNACCOUNTED_MAX))

    def note_resident(self, resident: int) -> None:
        """The process's resident size (the server reads it once a second)."""
        self.unaccounted = max(0, resident - self.held)

    # --- the check -----------------------------------------------------------------------

    def check(self, asking=None) -> int:
        """Page out past the budget, measure ``held``, raise or clear the alarm; returns held.
        ``asking``: the queue whose intake triggered the check (it pages first)."""
        self.unchecked = 0
        queued = self.used()
        if self.limit and queued > self.limit:
            queued = self._page(queued, self.limit, asking)
        held = queued + self.unacked() + self.buffers
        if self.watermark:
            threshold = self.threshold()
            if held > threshold and self.limit and queued:
                # page to disk before the alarm fires: only what cannot be paged raises it
                queued = self._page(queued, 0, asking)
                held = queued + self.unacked() + self.buffers
            self.held = held
            if not self.alarmed and held > threshold:
                self._set_alarm(True, held, threshold)
            elif self.alarmed and held < threshold * CLEAR_RATIO:
                self._set_alarm(False, held, threshold)
        self.held = held
        return held

    def _page(self, queued: int, target: int, asking) -> int:
        """Page queues out, the asking one first, then the largest, until ``queued`` <= target."""
        def size(q) -> int:
            return q.ready_bytes + len(q.ready) * MESSAGE_OVERHEAD
        order = sorted(self._queues(), key=size, reverse=True)
        if asking is not None:
            order.insert(0, asking)
        for q in order:
            if queued <= target:
                break
            before = size(q)
            if before == 0:
                continue
            q.page_out()
            queued -= before - size(q)
        return queued

    def _set_alarm(self, raised: bool, held: int, threshold: int) -> None:
        self.alarmed = raised
        if self.on_alarm is not None:
            self.on_alarm(raised, f"Warren holds {held} octets (queued, unacked, buffers) against a limit of "
                                  f"{threshold} (watermark {self.watermark} less {self.watermark - threshold} "
                                  "used by the process besides)")
