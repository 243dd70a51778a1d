"""Priority queues (warren.broker.queues.priority) and the class factory, on the model alone."""

from __future__ import annotations

from warren.broker.message import Message
from warren.broker.queue import Queue
from warren.broker.queues import PriorityQueue, PriorityReady, queue_class
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
    q = PriorityQueue(None, "pq", arguments={"x-max-priority": 2})
    for b, p in [("low", 0), ("high", 2), ("mid", 1)]:
        q.publish(msg(b, p))
    out = []
    while (e := q.take(no_ack=True)) is not None:
        out.append(e[1].body.decode())
    assert out == ["high", "mid", "low"]
    assert q.ready_bytes == 0
