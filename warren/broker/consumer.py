"""A consumer: one basic.consume on one channel, reading from one queue.

Its deliveries go out through its channel's ``DeliverySink`` (``delivery.py``): the consumer
only knows whether the transport can take more (``sink.can_accept``), never a connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warren.spec.fields import encode_shortstr

if TYPE_CHECKING:
    from warren.broker.channel import Channel
    from warren.broker.queues.base import QueueBase

__all__ = ["Consumer"]


class Consumer:
    __slots__ = ("tag", "tag_ss", "channel", "sink", "queue", "no_ack", "exclusive", "arguments", "priority",
                 "prefetch_count", "prefetch_size", "unacked", "unacked_bytes", "has_capacity", "counted_capacity",
                 "credit")

    def __init__(self, tag: str, channel: "Channel", queue: "QueueBase", no_ack: bool, exclusive: bool,
                 arguments: dict, prefetch_count: int, prefetch_size: int) -> None:
        self.tag = tag
        self.tag_ss = encode_shortstr(tag)  # ready for basic.deliver
        self.channel = channel
        self.sink = channel.sink  # the protocol's DeliverySink of the channel
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.arguments = arguments
        # x-priority (RabbitMQ consumer priorities): the channel refuses a non-integer with 406
        p = arguments.get("x-priority", 0) if arguments else 0
        self.priority = p if isinstance(p, int) and not isinstance(p, bool) else 0
        # RabbitMQ: basic.qos with global=0 sets the limit of consumers created afterwards
        self.prefetch_count = prefetch_count
        self.prefetch_size = prefetch_size
        self.unacked = 0
        self.unacked_bytes = 0
        # has_capacity(): whether a delivery may go to this consumer now. It runs for every
        # delivery, so it is the sink's own check for a no-ack consumer (only the transport
        # limits it; a closed channel's sink is stopped), else _capacity_acked.
        self.has_capacity = self.sink.can_accept if no_ack else self._capacity_acked
        # the same bound method while has_capacity is ours and counts prefetch (window(): one
        # identity test; 0-10's credit replaces has_capacity, a no-ack consumer never had it)
        self.counted_capacity = None if no_ack else self.has_capacity
        # the keeper of the credit its protocol grants (0-10, 1.0: warren/broker/credit.py), which
        # then gates has_capacity and is charged per delivery; None: prefetch alone
        self.credit = None

    def start(self) -> None:
        """Its consume was answered: it gets what its queue has ready."""
        self.queue.dispatch()

    def _capacity_acked(self) -> bool:
        """Its own prefetch, its channel's (global) prefetch, then the transport (the sink)."""
        ch = self.channel
        if ch.closed:
            return False  # its channel is closing: a queue dispatching meanwhile must skip it
        if self.prefetch_count and self.unacked >= self.prefetch_count:
            return False
        if self.prefetch_size and self.unacked_bytes >= self.prefetch_size:
            return False
        if ch.prefetch_count and ch.consumer_unacked >= ch.prefetch_count:
            return False
        if ch.prefetch_size and ch.consumer_unacked_bytes >= ch.prefetch_size:
            return False
        return self.sink.can_accept()

    def window(self) -> int:
        """How many deliveries the prefetch counts let through now, for a dispatch loop that
        counts them down instead of asking ``has_capacity`` before each (the transport is still
        asked each time: ``sink.can_accept``); -1 when that is not a count: a no-ack consumer,
        an octet limit, or another ``has_capacity`` (0-10's credit, warren/protocol/amqp0_10)."""
        if self.has_capacity is not self.counted_capacity:
            return -1
        ch = self.channel
        if self.prefetch_size or ch.prefetch_size:
            return -1
        if ch.closed:
            return 0
        room = self.prefetch_count - self.unacked if self.prefetch_count else 1 << 62
        if ch.prefetch_count and ch.prefetch_count - ch.consumer_unacked < room:
            room = ch.prefetch_count - ch.consumer_unacked
        return room if room > 0 else 0

    def __repr__(self) -> str:
        return f"<Consumer {self.tag!r} on {self.queue.name!r}>"
