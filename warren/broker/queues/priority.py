"""A priority queue (``x-max-priority``): one FIFO per priority, the highest served first.

A message's priority is its ``priority`` property, 0 when absent, the queue's maximum when
above it (RabbitMQ). Within a priority the order is arrival order, requeued messages back in
their places. Everything else (TTL, limits, dead-lettering, consumers, durability) is the
classic queue's: ``PriorityReady`` stands in for its deque of ready entries.

As in RabbitMQ, the "head" is the first message of the highest priority: it is what x-overflow
drop-head drops and the only place TTL looks, so an expired low-priority message waits behind
higher-priority ones until they are gone (RabbitMQ documents the same).

Priority queues do not page: their ready messages stay in memory (``page_out`` does nothing).
A durable priority queue recovered at start-up reads its first 2048 messages in priority order
and the rest, as before, in batches: the order by priority then holds within each batch.

Qpid's priority queues (``qpid.priorities`` / ``x-qpid-priorities``: N levels, 1 to 10) are
``QpidPriorityQueue``: a message without a priority has Qpid's default, 4, and priorities map
onto the N levels centred on 4-5, as Qpid's brokers do: ``level = clamp(p - (5 - ceil(N/2)),
0, N - 1)`` (with 5 levels: 0-2, 3, 4, 5, 6 and above; with 10: 0..9, higher ones as 9). A
length limit (``qpid.policy_type`` ``ring``, or any drop-head) drops the oldest message of the
lowest level first, where RabbitMQ's drop-head takes the head (the highest). Qpid's
fairshare (``x-qpid-fairshare[-LEVEL]``) is ``FairshareReady``: levels are served from the top
down in passes, each level at most its limit of messages in a row per pass; when no level at or
below the current one may give more, a new pass starts from the top.
"""

from __future__ import annotations

from collections import deque

from warren.broker.dead_letter import MAXLEN

from warren.broker.queue import Queue
from warren.broker.queues.qpid_args import fairshare_limits, priority_levels
from warren.broker.message import PRIORITY_HI

__all__ = ["PriorityQueue", "PriorityReady", "message_priority", "QpidPriorityQueue", "QpidPriorityReady",
           "FairshareReady", "qpid_level"]



def message_priority(msg, max_priority: int) -> int:
    props = msg.properties
    if len(props) < 2 or not props[0] & PRIORITY_HI:
        return 0
    p = msg.decoded.priority or 0
    return p if p <= max_priority else max_priority


class PriorityReady:
    """The ready entries ``(seq, message, redelivered, deadline)`` of a priority queue, with the
    deque operations ``Queue`` uses: ``[0]`` (the head), ``popleft``, ``append``, ``len``,
    iteration, ``clear``; plus ``put_back``."""

    __slots__ = ("levels", "max", "n", "top")

    def __init__(self, max_priority: int) -> None:
        self.max = max_priority
        self.levels = [deque() for _ in range(max_priority + 1)]
        self.n = 0
        self.top = 0  # no level above this one holds anything

    def __len__(self) -> int:
        return self.n

    def __bool__(self) -> bool:
        return self.n > 0

    def _head_level(self) -> deque:
        levels = self.levels
        t = self.top
        while t > 0 and not levels[t]:
            t -= 1
        self.top = t
        return levels[t]

    def __getitem__(self, i: int):
        if i != 0:
            raise IndexError("a priority queue only shows its head")
        return self._head_level()[0]

    def popleft(self):
        entry = self._head_level().popleft()
        self.n -= 1
        return entry

    def level(self, msg) -> int:
        """The level a message waits at (its priority, capped at the maximum)."""
        return message_priority(msg, self.max)

    def append(self, entry) -> None:
        p = message_priority(entry[1], self.max)  # not self.level(): one call less per message
        self.levels[p].append(entry)
        self.n += 1
        if p > self.top:
            self.top = p

    def __iter__(self):
        for level in reversed(self.levels):
            yield from level

    def clear(self) -> None:
        for level in self.levels:
            level.clear()
        self.n = 0
        self.top = 0

    def remove_seq(self, seq: int):
        """Take the entry numbered ``seq`` out wherever it is (a browsed message acquired by
        0-10's message.acquire, ``Queue.take_seq``); None when it is not ready."""
        for level in self.levels:
            for i, entry in enumerate(level):
                if entry[0] == seq:
                    del level[i]
                    self.n -= 1
                    return entry
                if entry[0] > seq:
                    break
        return None

    def put_back(self, entries: list) -> None:
        """Requeued entries (in seq order) back in their places within their priorities."""
        by_level: dict[int, list] = {}
        for e in entries:
            by_level.setdefault(self.level(e[1]), []).append(e)
        for p, group in by_level.items():
            level = self.levels[p]
            if not level or group[-1][0] < level[0][0]:
                level.extendleft(reversed(group))
            else:  # interleaved with earlier requeues: merge
                self.levels[p] = deque(sorted([*level, *group], key=lambda e: e[0]))
            if p > self.top:
                self.top = p
        self.n += len(entries)


QPID_DEFAULT_PRIORITY = 4  # a message without a priority (0-10's and AMQP 1.0's "medium")


def qpid_level(msg, levels: int) -> int:
    """The level (0 = lowest) of a message among a Qpid priority queue's ``levels``."""
    props = msg.properties
    if len(props) < 2 or not props[0] & PRIORITY_HI:
        p = QPID_DEFAULT_PRIORITY
    else:
        p = msg.decoded.priority
        if p is None:
            p = QPID_DEFAULT_PRIORITY
    p -= 5 - (levels + 1) // 2  # Qpid centres the levels on 4-5: offset 5 - ceil(levels / 2)
    return 0 if p < 0 else levels - 1 if p >= levels else p


class QpidPriorityReady(PriorityReady):
    """``PriorityReady`` with Qpid's levels, and the lowest level's oldest entry on request."""

    __slots__ = ()

    def __init__(self, levels: int) -> None:
        super().__init__(levels - 1)

    def level(self, msg) -> int:
        return qpid_level(msg, self.max + 1)

    def append(self, entry) -> None:
        p = qpid_level(entry[1], self.max + 1)
        self.levels[p].append(entry)
        self.n += 1
        if p > self.top:
            self.top = p

    def pop_lowest(self):
        """The oldest entry of the lowest level that holds one (a ring queue's victim)."""
        for level in self.levels:
            if level:
                self.n -= 1
                return level.popleft()
        raise IndexError("pop from an empty priority queue")


class FairshareReady(QpidPriorityReady):
    """``QpidPriorityReady`` whose head follows Qpid's fairshare limits (module docstring)."""

    __slots__ = ("limits", "pos", "count")

    def __init__(self, levels: int, limits: list[int]) -> None:
        super().__init__(levels)
        self.limits = limits  # per level, 0 = no limit
        self.pos = levels - 1  # the level the current pass is at
        self.count = 0  # messages it gave in a row

    def _pick(self) -> tuple[int, int]:
        """(level, count once taken) of the next entry."""
        levels, limits = self.levels, self.limits
        pos, count = self.pos, self.count
        for _ in range(2):  # the current pass, then a new one from the top
            for level in range(pos, -1, -1):
                if not levels[level]:
                    continue
                given = count if level == pos else 0
                limit = limits[level]
                if limit and given >= limit:
                    continue  # its turn in this pass is over
                return level, given + 1
            pos, count = self.max, 0
        raise IndexError("pop from an empty priority queue")

    def __getitem__(self, i: int):
        if i != 0:
            raise IndexError("a priority queue only shows its head")
        return self.levels[self._pick()[0]][0]

    def popleft(self):
        level, self.count = self._pick()
        self.pos = level
        self.n -= 1
        return self.levels[level].popleft()


class PriorityQueue(Queue):
    def __init__(self, vhost, name: str, durable: bool = False, exclusive_owner=None,
                 auto_delete: bool = False, arguments: dict | None = None) -> None:
        super().__init__(vhost, name, durable, exclusive_owner, auto_delete, arguments)
        self.ready = self.new_ready()

    def new_ready(self) -> PriorityReady:
        self.max_priority: int = self.arguments["x-max-priority"]
        return PriorityReady(self.max_priority)

    def page_out(self) -> None:
        pass  # priority queues stay in memory (module docstring)

    def _put_back(self, entries: list) -> None:
        self.ready.put_back(entries)
        self.ready_bytes += sum(len(e[1].body) for e in entries)

    def __repr__(self) -> str:
        return f"<PriorityQueue {self.name!r} ready={len(self.ready)} consumers={len(self.consumers)}>"


class QpidPriorityQueue(PriorityQueue):
    """A priority queue declared with Qpid's ``qpid.priorities`` / ``x-qpid-priorities``."""

    def new_ready(self) -> PriorityReady:
        self.levels = priority_levels(self.arguments)
        self.max_priority = self.levels - 1
        limits = fairshare_limits(self.arguments, self.levels)
        return FairshareReady(self.levels, limits) if limits else QpidPriorityReady(self.levels)

    def _drop_over_limit(self) -> None:
        """A full queue drops the lowest priorities first, oldest first (Qpid's ring queues)."""
        gone = []
        ready = self.ready
        while ready and self._over_limit():
            seq, msg, _, _ = ready.pop_lowest()
            self.ready_bytes -= len(msg.body)
            self.forget(seq, msg)
            gone.append(msg)
        self._dead_letter(gone, MAXLEN)

    def __repr__(self) -> str:
        return f"<QpidPriorityQueue {self.name!r} levels={self.levels} ready={len(self.ready)}>"
