"""Shared by the queue-kind unit tests: messages with headers and priorities, and a channel
that records deliveries (a consumer's channel and its own DeliverySink, always writable)."""

from __future__ import annotations

from warren.broker.consumer import Consumer
from warren.broker.message import Message
from warren.spec.amqp0_9_1 import BasicProperties


def msg(body: str, headers: dict | None = None, priority: int | None = None, expiration: str | None = None,
        persistent: bool = False) -> Message:
    props = BasicProperties(headers=headers, priority=priority, expiration=expiration,
                            delivery_mode=2 if persistent else None)
    m = Message("", "q", props.encode(), body.encode())
    if expiration is not None:
        m.check_expiration()
    return m


class FakeChannel:
    def __init__(self) -> None:
        self.sink = self
        self.closed = False
        self.prefetch_count = self.prefetch_size = 0
        self.consumer_unacked = self.consumer_unacked_bytes = 0
        self.deliveries: list[tuple] = []  # (consumer tag, seq, message)

    def can_accept(self) -> bool:
        return True

    def deliver(self, consumer, queue, seq, message, redelivered) -> None:
        consumer.unacked += 1
        self.deliveries.append((consumer.tag, seq, message))

    def bodies(self, tag: str | None = None) -> list[str]:
        return [m.body.decode() for t, _, m in self.deliveries if tag is None or t == tag]


def consumer(q, tag: str, prefetch: int = 1, no_ack: bool = False) -> Consumer:
    c = Consumer(tag, FakeChannel(), q, no_ack, False, {}, prefetch, 0)
    q.add_consumer(c)
    q.dispatch()  # as basic.consume does
    return c


def delivered(c: Consumer) -> list[tuple]:
    """(seq, message) of every delivery to ``c`` so far."""
    return [(seq, m) for t, seq, m in c.channel.deliveries if t == c.tag]


def settle(q, c: Consumer, body: str, how: str = "ack") -> None:
    """Settle ``c``'s delivery of ``body`` as a channel does: ack, reject or requeue."""
    seq, m = next((s, m) for s, m in delivered(c) if m.body.decode() == body)
    c.unacked -= 1
    if how == "ack":
        q.forget(seq, m)
    elif how == "reject":
        q.reject(seq, m)
    else:
        q.requeue([(seq, m)])
    q.dispatch()


def drain(q) -> list[str]:
    out = []
    while (e := q.take(no_ack=True)) is not None:
        out.append(e[1].body.decode())
    return out


def dead_lettering(arguments: dict):
    """(queue "q" with ``arguments`` dead-lettering to queue "dead", "dead") in a new vhost."""
    from warren.broker.queue import Queue
    from warren.broker.vhost import VirtualHost
    vhost = VirtualHost("/")
    q = Queue(vhost, "q", arguments={**arguments, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"})
    dead = Queue(vhost, "dead")
    vhost.queues.update(q=q, dead=dead)
    return q, dead
