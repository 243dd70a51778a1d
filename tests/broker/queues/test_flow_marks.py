"""The flow marks (warren/broker/queues/flow_marks.py) on a queue model: congested past a high
mark with consumers, drained below half of it; end to end: tests/e2e/test_flow.py."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.queues.flow_marks import FlowMarks
from warren.broker.vhost import VirtualHost

from .helpers import consumer, msg


def marked_queue(high: int) -> tuple[Queue, list]:
    q = Queue(VirtualHost("/"), "q")
    told: list = []
    q.flow = FlowMarks(high, listener=type("L", (), {"drained": staticmethod(lambda queue: told.append(queue.name))})())
    return q, told


def test_a_backlog_past_the_mark_with_a_consumer_congests_until_half_of_it_drains():
    q, told = marked_queue(4)
    c = consumer(q, "c", prefetch=1)
    for i in range(6):
        q.publish(msg(str(i)))
    assert q.congested and told == []
    while len(q.ready) > 2:  # the consumer takes what it was given, one at a time
        seq, m = c.channel.deliveries[-1][1:]
        c.unacked -= 1
        q.forget(seq, m)
        q.dispatch()
        assert q.congested == (len(q.ready) > 2)
    assert told == ["q"]


def test_without_consumers_a_backlog_never_congests_and_losing_the_last_one_releases():
    q, told = marked_queue(2)
    for i in range(5):
        q.publish(msg(str(i)))
    assert not q.congested  # paging bounds its memory instead
    c = consumer(q, "c", prefetch=1)
    q.publish(msg("x"))
    assert q.congested
    q.remove_consumer(c)
    assert not q.congested and told == ["q"]


def test_the_byte_mark_counts_ready_body_octets():
    q, _ = marked_queue(1000)
    q.flow.high_bytes = 10
    consumer(q, "c", prefetch=1)
    q.publish(msg("0123456789"))  # delivered at once
    q.publish(msg("0123456789"))
    assert not q.congested
    q.publish(msg("x"))
    assert q.congested
