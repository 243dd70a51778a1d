"""Message TTL and x-expires (warren/broker/queues/expiry.py) on a queue model; end to end
through pika: tests/e2e/test_ttl.py."""

from __future__ import annotations

import time

from warren.broker.queue import Queue
from warren.broker.vhost import VirtualHost

from .helpers import consumer, dead_lettering, drain, msg


def test_the_lower_of_queue_and_message_ttl_sets_the_deadline():
    q = Queue(VirtualHost("/"), "q", arguments={"x-message-ttl": 60_000})
    before = time.monotonic()
    q.publish(msg("queue-ttl"))
    q.publish(msg("message-ttl", expiration="1000"))
    (_, _, _, queue_deadline), (_, _, _, message_deadline) = q.ready
    assert 59 < queue_deadline - before <= 60.5
    assert 0.9 < message_deadline - before <= 1.5


def test_expired_messages_leave_from_the_head_only_and_are_dead_lettered_in_order():
    q, dead = dead_lettering({})
    q.publish(msg("a", expiration="60000"))
    q.publish(msg("b", expiration="1"))  # behind a: stays until a leaves (RabbitMQ)
    time.sleep(0.01)
    assert q.message_count == 2
    a = q.take(no_ack=True)
    assert a[1].body == b"a"
    assert q.message_count == 0 and drain(dead) == ["b"]


def test_a_ttl_of_zero_keeps_a_message_only_for_a_consumer_that_can_take_it_now():
    q = Queue(VirtualHost("/"), "q", arguments={"x-message-ttl": 0})
    q.publish(msg("nobody"))
    assert q.message_count == 0
    c = consumer(q, "c", prefetch=1)
    q.publish(msg("taken"))
    assert c.channel.bodies() == ["taken"]
    q.publish(msg("full"))  # the consumer's window is full: expired at once
    assert q.message_count == 0


def test_tick_deletes_a_queue_unused_for_x_expires():
    vhost = VirtualHost("/")
    q = vhost.declare_queue(None, "q", False, False, False, False, {"x-expires": 50})
    assert q in vhost.timers
    assert q.tick(time.monotonic()) is True  # used just now
    assert q.tick(time.monotonic() + 0.06) is False
    assert "q" not in vhost.queues and q.deleted
