"""Paging of a classic queue (``Queue.page_out``/``page_in``) without a server."""

from __future__ import annotations

from warren.broker.durability import Durability
from warren.broker.message import Message
from warren.broker.queue import Queue
from warren.broker.queues.paging import PAGE_BATCH, PAGE_KEEP
from warren.broker.vhost import VirtualHost


class Budget:
    """A memory budget that is over whenever the test says so (MemoryBudget's interface to a
    queue: the intake counter, and ``check``, which pages the asking queue out when over)."""

    check_every = 1 << 20

    def __init__(self) -> None:
        self.over_now = False
        self.unchecked = 0

    def check(self, asking=None) -> None:
        self.unchecked = 0
        if self.over_now and asking is not None:
            asking.page_out()


def _queue(tmp_path) -> tuple[Queue, Budget]:
    q = Queue(VirtualHost("/"), "q")
    q.durability = Durability(tmp_path / "data", fsync=False)
    q.memory = budget = Budget()
    return q, budget


def _publish(q: Queue, n: int, start: int) -> None:
    for i in range(start, start + n):
        q.publish(Message("", "q", b"\x00\x00", b"m%d" % i))


def _drain(q: Queue) -> list[bytes]:
    bodies = []
    while (entry := q.take(no_ack=True)) is not None:
        bodies.append(bytes(entry[1].body))
    return bodies


def test_paging_again_after_reading_everything_back_keeps_every_message_in_order(tmp_path):
    # The tail of the ready list can hold messages read back from the spill, below the spill's
    # last seq: a second page-out must not append them to that spill again (it takes seqs in
    # increasing order only); it starts a new spill once the old one is empty.
    q, budget = _queue(tmp_path)
    budget.over_now = True
    total = 3 * PAGE_BATCH
    _publish(q, total, 0)
    assert q.paged > 0
    budget.over_now = False
    # read back everything that was paged, without taking anything yet
    while q.paged:
        q.page_in()
    assert len(q.ready) == total
    budget.over_now = True
    _publish(q, 2 * PAGE_BATCH, total)  # memory over again: the tail pages out once more
    assert q.paged > 0
    budget.over_now = False
    bodies = _drain(q)
    assert bodies == [b"m%d" % i for i in range(total + 2 * PAGE_BATCH)]
    assert len(q.ready) == 0 and q.paged == 0
    assert PAGE_KEEP < total
