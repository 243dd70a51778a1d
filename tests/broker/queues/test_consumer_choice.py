"""Single active consumer and consumer priorities (warren/broker/queues/consumer_choice.py) on a
queue model; end to end through pika beside RabbitMQ: tests/e2e/test_consumers.py."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.vhost import VirtualHost

from .helpers import consumer, msg, settle


def prioritised(q, tag: str, priority: int, prefetch: int = 1):
    c = consumer(q, tag, prefetch=prefetch)
    q.remove_consumer(c)
    c.priority = priority
    q.add_consumer(c)
    return c


def test_consumers_are_kept_highest_priority_first_and_the_highest_with_room_gets_the_message():
    q = Queue(VirtualHost("/"), "q")
    low = prioritised(q, "low", -1, prefetch=10)
    high = prioritised(q, "high", 5)
    mid = prioritised(q, "mid", 1)
    assert [c.tag for c in q.consumers] == ["high", "mid", "low"] and not q._plain
    for body in "abcd":
        q.publish(msg(body))
    assert high.channel.bodies() == ["a"] and mid.channel.bodies() == ["b"]
    assert low.channel.bodies() == ["c", "d"]


def test_equal_priorities_take_turns():
    q = Queue(VirtualHost("/"), "q")
    a, b = prioritised(q, "a", 2, 10), prioritised(q, "b", 2, 10)
    prioritised(q, "z", 0, 10)
    for body in "1234":
        q.publish(msg(body))
    assert a.channel.bodies() == ["1", "3"] and b.channel.bodies() == ["2", "4"]


def test_the_single_active_consumer_is_the_first_registered_and_the_next_takes_over():
    q = Queue(VirtualHost("/"), "q", arguments={"x-single-active-consumer": True})
    first = consumer(q, "first", prefetch=1)
    second = consumer(q, "second", prefetch=1)
    q.publish(msg("a"))
    q.publish(msg("b"))
    assert first.channel.bodies() == ["a"] and second.channel.bodies() == []
    settle(q, first, "a")
    q.dispatch()
    assert first.channel.bodies() == ["a", "b"]
    q.remove_consumer(first)
    q.publish(msg("c"))
    assert second.channel.bodies() == ["c"]


def test_the_last_consumer_leaving_an_auto_delete_queue_deletes_it():
    vhost = VirtualHost("/")
    q = vhost.declare_queue(None, "q", False, False, False, True, {})
    c = consumer(q, "c")
    assert q.has_exclusive_consumer() is False
    q.remove_consumer(c)
    assert q.deleted and "q" not in vhost.queues
