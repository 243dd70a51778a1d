"""Where deliveries leave the broker: the ``DeliverySink`` each protocol implements.

Queues hand a message to a consumer's channel (``Channel.deliver``), which numbers it and keeps
what an ack, reject or release needs; the channel's sink then puts it on the wire. The broker
never sees frames or a protocol connection: 0-9-1 writes basic.deliver
(``warren/protocol/amqp0_9_1/delivery.py``), 0-10 would write message.transfer.

A sink answers two questions, both asked for every delivery (keep them cheap):

* ``can_accept()``: may the transport take one more delivery now? False while the client asked
  the broker to stop (0-9-1 channel.flow), while the socket is not writable, or while the output
  queued for one write is full; the protocol calls ``Channel.resume_delivery`` when that changes.
  Prefetch and credit limits are the broker's (``Consumer.has_capacity``), not the sink's.
* ``deliver(consumer, tag, redelivered, message)``: send it. ``tag`` is the channel's delivery
  tag, ``consumer`` the broker's ``Consumer`` (or direct reply-to's ``ReplyConsumer``), whose
  ``tag`` names the subscription.

Two rarer messages go the same way: ``returned(message)``, a mandatory publish no queue took,
and ``cancelled(consumer_tag)``, a consumer whose queue went away. ``stop()``: the channel is
closed; ``can_accept`` answers False from then on.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["DeliverySink"]


class DeliverySink(Protocol):
    def can_accept(self) -> bool:
        ...

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        ...

    def returned(self, message) -> None:
        ...

    def cancelled(self, consumer_tag: str) -> None:
        ...

    def stop(self) -> None:
        ...
