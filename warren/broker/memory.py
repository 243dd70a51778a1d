"""The memory budget for queued messages, shared by every queue of the broker.

Accounting is lazy: a queue asks ``over()`` after every MiB it takes in, and ``over`` sums
the queues' in-memory ready octets (plus a per-message overhead for the Python objects). When
the sum passes the budget, the asking queue pages its tail out to disk (queue.py).
"""

from __future__ import annotations

import os

__all__ = ["MemoryBudget", "default_budget"]

# octets of Python objects per queued message besides its body (Message, ready entry, seq,
# body object): bench/memory.py measured 330 (transient) and 349 (persistent) with 16 B bodies
MESSAGE_OVERHEAD = 350


def default_budget() -> int:
    """A fifth of physical memory (RabbitMQ starts paging at half of its 40 % watermark)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 5
    except (ValueError, OSError):
        return 1 << 30


class MemoryBudget:
    def __init__(self, limit: int, queues) -> None:
        self.limit = limit  # 0 = unlimited: never page
        self._queues = queues  # a callable returning every queue

    def used(self) -> int:
        return sum(q.ready_bytes + len(q.ready) * MESSAGE_OVERHEAD for q in self._queues())

    def over(self) -> bool:
        return bool(self.limit) and self.used() > self.limit
