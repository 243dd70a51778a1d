"""The memory accounting (warren/broker/memory.py) with real queues and stores, without a server:
paging before the alarm, the alarm within a flood, and the alarm clearing once memory is free."""

from __future__ import annotations

from warren.broker.durability import Durability
from warren.broker.memory import CLEAR_RATIO, MESSAGE_OVERHEAD, MemoryBudget
from warren.broker.message import Message
from warren.broker.queue import Queue
from warren.broker.queues.paging import PAGE_KEEP, PAGE_KEEP_BYTES
from warren.broker.vhost import VirtualHost

MiB = 1 << 20
BODY = b"x" * 1024


def _setup(tmp_path, budget: int, watermark: int):
    queues: list[Queue] = []
    memory = MemoryBudget(budget, lambda: list(queues))
    alarms: list[tuple[bool, int]] = []
    memory.set_watermark(watermark, on_alarm=lambda raised, detail: alarms.append((raised, memory.used())))
    durability = Durability(tmp_path / "data", fsync=False)

    def new_queue(name: str) -> Queue:
        q = Queue(VirtualHost("/"), name)
        q.durability, q.memory = durability, memory
        queues.append(q)
        return q

    return memory, queues, alarms, new_queue


def _flood(q: Queue, octets: int) -> None:
    for _ in range(octets // len(BODY)):
        q.publish(Message("", q.name, b"\x00\x00", BODY))


def test_a_flood_pages_out_and_never_raises_the_alarm(tmp_path):
    memory, _, alarms, new_queue = _setup(tmp_path, budget=2 * MiB, watermark=8 * MiB)
    q = new_queue("flood")
    _flood(q, 32 * MiB)
    assert q.paged > 0 and q.message_count == 32 * MiB // len(BODY)
    assert alarms == []
    # what stays in memory: the budget, or the head a paging queue keeps (PAGE_KEEP messages)
    assert memory.check() <= max(2 * MiB, PAGE_KEEP * (len(BODY) + MESSAGE_OVERHEAD)) + memory.check_every


def test_without_paging_the_alarm_fires_within_the_flood_and_clears_once_the_queue_is_gone(tmp_path):
    memory, queues, alarms, new_queue = _setup(tmp_path, budget=0, watermark=8 * MiB)
    q = new_queue("unpaged")
    _flood(q, 16 * MiB)
    assert len(alarms) == 1 and alarms[0][0] is True
    # raised at the first check past the watermark, not a second later
    assert alarms[0][1] <= 8 * MiB + memory.check_every + len(BODY) + MESSAGE_OVERHEAD
    queues.remove(q)  # deleted
    memory.check()
    assert alarms[-1][0] is False and not memory.alarmed


def test_the_alarm_clears_with_hysteresis_as_a_consumer_drains(tmp_path):
    memory, _, alarms, new_queue = _setup(tmp_path, budget=0, watermark=4 * MiB)
    q = new_queue("drained")
    _flood(q, 5 * MiB)
    assert memory.alarmed
    while memory.used() > 4 * MiB * (1 + CLEAR_RATIO) / 2:  # below the watermark, above the clear mark
        q.take(no_ack=True)
        memory.check()
    assert memory.alarmed
    while memory.alarmed and q.take(no_ack=True) is not None:
        memory.check()
    assert not memory.alarmed and 4 * MiB * CLEAR_RATIO - 2 * len(BODY) < memory.used() < 4 * MiB * CLEAR_RATIO
    assert [raised for raised, _ in alarms] == [True, False]


def test_resident_memory_lowers_the_threshold_but_never_below_a_quarter(tmp_path):
    """What the process holds besides (interpreter, allocator retention) counts against the
    watermark, up to three quarters of it: retention alone can never hold the alarm on."""
    memory, _, _, _ = _setup(tmp_path, budget=0, watermark=8 * MiB)
    memory.note_resident(3 * MiB)
    assert memory.threshold() == 5 * MiB
    memory.note_resident(100 * MiB)  # far above the watermark with nothing held
    assert memory.threshold() == 2 * MiB
    assert not memory.alarmed and memory.check() == 0


def test_large_messages_page_out_by_octets(tmp_path):
    """2048 messages are kept at a paging queue's head, but never more than PAGE_KEEP_BYTES."""
    memory, _, alarms, new_queue = _setup(tmp_path, budget=4 * MiB, watermark=32 * MiB)
    q = new_queue("large")
    big = b"y" * (256 * 1024)
    for _ in range(64):  # 16 MiB
        q.publish(Message("", "large", b"\x00\x00", big))
    assert q.paged > 0 and q.ready_bytes <= PAGE_KEEP_BYTES + memory.check_every
    assert alarms == []
    taken = 0
    while q.take(no_ack=True) is not None:
        taken += 1
        assert q.ready_bytes <= 2 * PAGE_KEEP_BYTES
    assert taken == 64
