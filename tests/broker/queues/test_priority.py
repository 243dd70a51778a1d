"""Priority queues (warren.broker.queues.priority) and the class factory, on the model alone."""

from __future__ import annotations

from warren.broker.message import Message
from warren.broker.queue import Queue
from warren.broker.queues.factory import new_queue, queue_class
from warren.broker.queues.priority import PriorityQueue, PriorityReady, QpidPriorityQueue
from warren.broker.queues.priority import qpid_level
from warren.broker.vhost import VirtualHost
from warren.spec.amqp0_9_1 import BasicProperties


def msg(body: str, priority=None) -> Message:
    return Message("", "q", BasicProperties(priority=priority).encode(), body.encode())


def entry(seq: int, body: str, priority=None):
    return (seq, msg(body, priority), False, 0)


def bodies(ready) -> list[str]:
    out = []
    while ready:
        out.append(ready.popleft()[1].body.decode())
    return out


def test_the_factory_picks_a_priority_queue_for_a_positive_maximum_only():
    assert queue_class({"x-max-priority": 3}) is PriorityQueue
    assert queue_class({"x-max-priority": 0}) is Queue
    assert queue_class({}) is Queue


def test_ready_entries_come_out_by_priority_then_arrival():
    r = PriorityReady(5)
    for i, (b, p) in enumerate([("a", 1), ("b", 5), ("c", None), ("d", 9), ("e", 1)]):
        r.append(entry(i, b, p))
    assert len(r) == 5 and r[0][1].body == b"b"
    assert bodies(r) == ["b", "d", "a", "e", "c"]
    assert not r and len(r) == 0


def test_put_back_restores_places_within_each_priority():
    r = PriorityReady(3)
    es = [entry(i, f"m{i}", p) for i, p in enumerate([3, 3, 1, 1])]
    for e in es:
        r.append(e)
    taken = [r.popleft(), r.popleft(), r.popleft()]  # m0, m1, m2
    r.put_back([taken[0], taken[2]])
    assert bodies(r) == ["m0", "m2", "m3"]


def test_a_priority_queue_serves_take_in_priority_order():
    q = PriorityQueue(VirtualHost("/"), "pq", arguments={"x-max-priority": 2})
    for b, p in [("low", 0), ("high", 2), ("mid", 1)]:
        q.publish(msg(b, p))
    out = []
    while (e := q.take(no_ack=True)) is not None:
        out.append(e[1].body.decode())
    assert out == ["high", "mid", "low"]
    assert q.ready_bytes == 0


# --- Qpid's priority levels (qpid.priorities / x-qpid-priorities) --------------------------------

def qpid_levels_of(levels: int) -> list[int]:
    return [qpid_level(msg("m", p), levels) for p in range(12)]


def test_qpid_levels_centre_on_four_and_five():
    assert qpid_levels_of(10) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]
    assert qpid_levels_of(5) == [0, 0, 0, 1, 2, 3, 4, 4, 4, 4, 4, 4]
    assert qpid_levels_of(2) == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1]
    assert qpid_levels_of(1) == [0] * 12
    assert qpid_level(msg("no priority"), 10) == 4 and qpid_level(msg("no priority"), 5) == 2  # Qpid's default, 4


def test_the_factory_picks_qpid_levels_over_an_x_max_priority_the_0_10_adapter_added():
    assert queue_class({"qpid.priorities": 5}) is QpidPriorityQueue
    assert queue_class({"x-qpid-priorities": 5, "x-max-priority": 5}) is QpidPriorityQueue
    assert queue_class({"x-max-priority": 5}) is PriorityQueue


def test_a_qpid_priority_queue_serves_by_level_then_arrival():
    q = QpidPriorityQueue(VirtualHost("/"), "qp", arguments={"x-qpid-priorities": 5})
    for i, p in enumerate([8, 9, 5, 1, 2, 2, 3, 4, 9, 7, 8, 9, 9, 2]):
        q.publish(msg(f"{p}-{i}", p))
    out = []
    while (e := q.take(no_ack=True)) is not None:
        out.append(e[1].body.decode())
    assert out == ["8-0", "9-1", "9-8", "7-9", "8-10", "9-11", "9-12", "5-2", "4-7", "3-6",
                   "1-3", "2-4", "2-5", "2-13"]


def test_a_full_qpid_priority_ring_drops_the_oldest_of_the_lowest_level():
    q = new_queue(VirtualHost("/"), "ring", arguments={"x-qpid-priorities": 10, "qpid.policy_type": "ring", "qpid.max_count": 5})
    for i, p in enumerate([8, 9, 5, 1, 2, 2, 3, 4, 9, 7, 8, 9, 9, 2]):
        q.publish(msg(f"{p}-{i}", p))
    assert len(q.ready) == 5
    assert bodies(q.ready) == ["9-1", "9-8", "9-11", "9-12", "8-10"]  # the 8 of index 0 was older than 8-10


def test_fairshare_gives_each_level_its_limit_in_a_row_per_pass():
    q = new_queue(VirtualHost("/"), "fs", arguments={"x-qpid-priorities": 10, "x-qpid-fairshare": 2, "x-qpid-fairshare-3": 0})
    for i, p in enumerate([9, 9, 9, 9, 5, 5, 5, 3, 3, 3]):
        q.publish(msg(f"{p}-{i}", p))
    out = []
    while (e := q.take(no_ack=True)) is not None:
        out.append(e[1].body.decode())
    # pass 1: two 9s, two 5s, every 3 (no limit on level 3); pass 2: the rest
    assert out == ["9-0", "9-1", "5-4", "5-5", "3-7", "3-8", "3-9", "9-2", "9-3", "5-6"]
