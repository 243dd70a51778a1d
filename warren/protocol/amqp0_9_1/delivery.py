"""The 0-9-1 ``DeliverySink`` of one channel (``warren/broker/delivery.py``): basic.deliver frames.

The broker's channel numbers a delivery and keeps its unacked record; this writes it into the
sans-IO connection with the compiled fast path (``ServerConnection.send_deliver``) and asks the
glue for a flush. A mandatory message no queue took goes back as basic.return, and a consumer
whose queue went away gets basic.cancel when its client announced consumer_cancel_notify. What stops deliveries at the transport is here too: the client's channel.flow,
a socket that is not writable (the session's ``writable``, set by the glue), and ``OUTPUT_BATCH``
octets already queued for one write.
"""

from __future__ import annotations

from warren.spec import amqp0_9_1 as spec

__all__ = ["ChannelSink", "OUTPUT_BATCH"]

# Deliveries queued for one connection before it must flush; dispatch resumes after the write.
# Bounds the memory of a no-ack consumer's burst and keeps each write one sane buffer
# (bench/throughput.py, no-ack flat out: one unbounded batch stalled the loop for seconds).
OUTPUT_BATCH = 1 << 20


class ChannelSink:
    __slots__ = ("session", "conn", "io", "number", "flow_active", "flush_asked")

    def __init__(self, session, number: int) -> None:
        self.session = session  # the connection's handler: its ``writable``
        self.conn = session.conn  # the sans-IO ServerConnection
        self.io = session.io  # the glue: want_flush
        self.number = number
        self.flow_active = True  # channel.flow from the client
        # a flush was asked for since the last one (the handler's before_flush clears it): one
        # want_flush per channel per write batch instead of one per delivery
        self.flush_asked = False

    def can_accept(self) -> bool:
        return self.flow_active and self.session.writable and self.conn.out_bytes < OUTPUT_BATCH

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        self.conn.send_deliver(self.number, consumer.tag_ss, tag, redelivered, message.exchange_ss,
                               message.routing_key_ss, message.properties, message.body)
        if not self.flush_asked:
            self.flush_asked = True
            self.session.sinks_flushing.append(self)
            self.io.want_flush()

    def stop(self) -> None:
        self.flow_active = False  # the channel is closed

    def returned(self, message) -> None:
        self.conn.send_content(self.number, spec.BasicReturn(312, "NO_ROUTE", message.exchange, message.routing_key),
                               message.properties, message.body)
        self.session.want_flush()

    def cancelled(self, consumer_tag: str) -> None:
        if self.session.capabilities.get("consumer_cancel_notify") and self.conn.channel_is_open(self.number):
            self.conn.send_method(self.number, spec.BasicCancel(consumer_tag, True))
            self.session.want_flush()
