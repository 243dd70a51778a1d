"""Giving the core away after a light loop turn that confirmed publishes.

A publisher with a window of confirms (shared/perf's ``-c128``, Spark's writer, any client that
waits for its confirms before it sends more) sends its next messages only once our basic.ack
reaches it and it gets a core to run on. On a machine whose cores are all busy, the broker's
loop polls again before that: it reads a fraction of a window, confirms it, polls again, and
its time goes on system calls and turns rather than messages. Measured (docs/performance.md,
session 12): 0.32 reads per message of about 3 KB, writes of 4 KB, the broker and both client
threads each waiting 20-40 % of the time for a core; 8 µs of broker CPU per message where the
same messages without confirms cost 4.4.

So at the end of a turn that read less than ``YIELD_BELOW`` octets and wrote confirms, the loop
calls ``sched_yield``: a thread waiting for this core runs now, and the next read carries its
next run of messages (the row above: 3.7 µs per message, and 12-15 % more of them). On a machine
with a core to spare the call returns at once, having nothing to give; a turn that read a lot
is behind already, and one that confirmed nothing answered no one who waits for it (yielding
there measured 4-6 % slower on the rows without confirms). ``--no-yield-after-confirms`` turns
it off.
"""

from __future__ import annotations

import os

__all__ = ["TurnPacer", "YIELD_BELOW"]

# octets read in a turn below which a turn that confirmed yields: the connection's own SMALL_READ
# (a read of 64 KiB or more means the broker is behind its publishers, not ahead of them)
YIELD_BELOW = 65536

_sched_yield = getattr(os, "sched_yield", None)  # absent on Windows: the pacer then does nothing


class TurnPacer:
    """Counts what a loop turn read and whether it confirmed; yields at its end (see above).
    ``read`` runs once per socket read, ``confirmed`` once per flush that wrote confirms."""

    __slots__ = ("loop", "read_octets", "confirmed", "_scheduled")

    def __init__(self, loop) -> None:
        self.loop = loop
        self.read_octets = 0
        self.confirmed = False  # set by the connections' flushes (AMQPConnection.flush)
        self._scheduled = False

    def read(self, octets: int) -> None:
        self.read_octets += octets
        if not self._scheduled:
            self._scheduled = True
            # after the turn's reads: a call_soon made during them runs once they are all done
            self.loop.call_soon(self._turn_ended)

    def _turn_ended(self) -> None:
        self._scheduled = False
        if self.confirmed and self.read_octets < YIELD_BELOW and _sched_yield is not None:
            _sched_yield()
        self.confirmed = False
        self.read_octets = 0
