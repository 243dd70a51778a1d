"""warren/broker/exchanges/base.py: ``Exchange.enqueue``, routing for a publisher that is no
client's channel (the HTTP API, a dtx commit passed on from another worker)."""

from __future__ import annotations

from warren.broker.message import Message
from warren.broker.vhost import VirtualHost


def test_enqueue_reaches_every_bound_queue_and_says_how_many():
    v = VirtualHost("/")
    v.declare_exchange("fan", "fanout", False, False, False, False, {})
    queues = [v.declare_queue(None, f"q{i}", False, False, False, False, {}) for i in range(3)]
    for q in queues[:2]:
        v.bind_queue(q, "fan", "", {})
    reached, need = v.exchanges["fan"].enqueue(Message("fan", "any", b"", b"hello"))
    assert (reached, need) == (2, 0)  # transient, no store: nothing waits for a disk
    assert [q.message_count for q in queues] == [1, 1, 0]
    assert bytes(queues[0].take(no_ack=True)[1].body) == b"hello"


def test_enqueue_of_an_unroutable_message_reaches_nothing():
    v = VirtualHost("/")
    v.declare_exchange("direct", "direct", False, False, False, False, {})
    assert v.exchanges["direct"].enqueue(Message("direct", "nobody", b"", b"lost")) == (0, 0)
