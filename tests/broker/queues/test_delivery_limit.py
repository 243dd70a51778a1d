"""x-delivery-limit and x-delivery-count (warren/broker/queues/delivery_limit.py) on a queue
model; end to end through pika: tests/e2e/test_delivery_limit.py."""

from __future__ import annotations

from warren.spec.amqp0_9_1 import BasicProperties

from .helpers import consumer, dead_lettering, delivered, drain, msg


def headers_of(message) -> dict:
    return BasicProperties.decode(message.properties, 0)[0].headers or {}


def count_of(message) -> int | None:
    return headers_of(message).get("x-delivery-count")


def test_a_message_returned_past_the_limit_is_dead_lettered_with_reason_delivery_limit():
    q, dead = dead_lettering({"x-delivery-limit": 1})
    q.publish(msg("m"))
    c = consumer(q, "c", prefetch=1)
    counts = []
    for _ in range(2):
        seq, m = delivered(c)[-1]
        counts.append(count_of(m))
        c.unacked -= 1
        q.requeue([(seq, m)])
    assert counts == [None, 1]  # no header the first time, as RabbitMQ 3.10's quorum queues
    assert q.message_count == 0 and [m.body for m in (e[1] for e in dead.ready)] == [b"m"]
    deaths = headers_of(dead.ready[0][1])["x-death"]
    assert deaths[0]["reason"] == "delivery_limit"


def test_a_reject_dead_letters_the_message_as_it_was_queued():
    q, dead = dead_lettering({"x-delivery-limit": 5})
    q.publish(msg("m"))
    assert count_of(q.take()[1]) == 0  # basic.get carries the count, 0 included
    seq = q._seq
    q.reject(seq, q.taken.by_seq[seq][0])
    (entry,) = dead.ready
    headers = headers_of(entry[1])
    assert "x-delivery-count" not in headers and headers["x-death"][0]["reason"] == "rejected"
    assert drain(q) == []
