"""Direct reply-to (RabbitMQ's ``amq.rabbitmq.reply-to``): RPC replies without a reply queue.

A client consumes from the pseudo-queue ``amq.rabbitmq.reply-to`` in no-ack mode (one such
consumer per channel), then publishes requests on that channel with ``reply-to`` set to
``amq.rabbitmq.reply-to``. The broker rewrites that property to
``amq.rabbitmq.reply-to.<token>``, where the token names the channel's reply consumer. A server
publishing its reply to the default exchange with that routing key reaches the consumer
directly: no queue, no ack, nothing stored; if the channel is gone the reply is dropped
(returned, when mandatory).

RabbitMQ's refusals (3.10, checked by ``tests/e2e/test_direct_reply_to.py``): consuming with
acks is 406 "reply consumer cannot acknowledge", a second reply consumer on the channel 406
"reply consumer already set", publishing with ``reply-to: amq.rabbitmq.reply-to`` on a
channel without one 406 "fast reply consumer does not exist". ``queue.declare`` of the
pseudo-queue (passive or not) answers ``declare-ok`` with 0 messages and 1 consumer, as does
a ``<token>`` name whose consumer exists; an unknown token is 404. Other queue methods
(get, bind, purge, delete) see no such queue.

AMQP 1.0 (RabbitMQ 4.2's Direct Reply-To, ``rabbitmq:volatile-queue``): each dynamic receiver
with that capability is a reply consumer of its own (``volatile``), any number on a session,
named by its address ``/queues/amq.rabbitmq.reply-to.<token>``; 1.0 requesters put that address
in their requests' ``reply-to`` themselves, so nothing is rewritten for them.

One difference: RabbitMQ 3.10 answers a mandatory reply with ``basic.return`` NO_ROUTE even
when it delivered it; Warren returns only replies it could not deliver.
"""

from __future__ import annotations

import base64
import os

from warren.spec.fields import encode_shortstr
from warren.codec.property_edits import replace_reply_to
from warren.errors import NotAllowed, NotFound, PreconditionFailed

__all__ = ["REPLY_TO", "PREFIX", "ReplyConsumer", "declare", "consume", "release", "rewrite", "volatile",
           "release_volatile"]

REPLY_TO = "amq.rabbitmq.reply-to"
PREFIX = REPLY_TO + "."
_NEEDLE = REPLY_TO.encode()


class ReplyConsumer:
    """A channel's reply consumer; also the destination a reply is routed to."""

    __slots__ = ("tag", "tag_ss", "token", "channel")
    congested = False  # replies go straight to a socket: no backlog, no flow control (queues/flow_marks.py)
    # what code handling queues and consumers reads of a route destination or a consumer:
    # a reply consumer is neither a named queue (dead_letter.py's cycle check) nor reads one
    name = None
    queue = None  # it reads no queue: replies are handed to it as they are routed

    def __init__(self, tag: str, token: str, channel) -> None:
        self.tag = tag
        self.tag_ss = encode_shortstr(tag)
        self.token = token
        self.channel = channel

    def start(self) -> None:
        """Its consume was answered: nothing waits for it (a reply goes to it as it comes)."""

    def publish(self, msg) -> int:
        """Deliver a reply at once (no-ack: nothing to remember). Returns 0: nothing to sync."""
        ch = self.channel
        if ch.closed:
            return 0
        tag = ch.next_tag
        ch.next_tag = tag + 1
        ch.sink.deliver(self, tag, False, msg)
        return 0


def lookup(vhost, routing_key: str) -> ReplyConsumer | None:
    """The reply consumer a default-exchange routing key names, if it exists."""
    if routing_key.startswith(PREFIX):
        return vhost.reply_channels.get(routing_key[len(PREFIX):])
    return None


def declare(channel, name: str) -> tuple[str, int, int]:
    """queue.declare of the pseudo-queue or of a reply address: (name, 0 messages, 1 consumer)."""
    if name != REPLY_TO and lookup(channel.vhost, name) is None:
        raise NotFound(f"no queue '{name}' in vhost '{channel.vhost.name}'")
    channel.last_queue = name
    return name, 0, 1


def consume(channel, tag: str, no_ack: bool) -> ReplyConsumer:
    """A consumer of the pseudo-queue: becomes the channel's reply consumer."""
    if tag and tag in channel.consumers:
        raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
    if not no_ack:
        raise PreconditionFailed("reply consumer cannot acknowledge")
    if channel.reply_consumer is not None:
        raise PreconditionFailed("reply consumer already set")
    rc = channel.reply_consumer = _registered(channel, tag or "amq.ctag-" + _random())
    return rc


def volatile(channel, tag: str) -> ReplyConsumer:
    """A reply consumer of an AMQP 1.0 link (RabbitMQ 4.2's volatile queue): not the channel's
    0-9-1 one, and a channel may have any number of them. Its channel's sink sends what reaches it."""
    return _registered(channel, tag)


def _registered(channel, tag: str) -> ReplyConsumer:
    """A reply consumer with a fresh token, known to its vhost (replies find it by the token)."""
    token = _random() + channel.vhost.directory.reply_suffix()  # (suffix: where another process sends it)
    rc = ReplyConsumer(tag, token, channel)
    channel.vhost.reply_channels[token] = rc
    return rc


def release_volatile(rc: ReplyConsumer) -> None:
    """Its link detached, or its session or connection ended: later replies are dropped."""
    rc.channel.vhost.reply_channels.pop(rc.token, None)


def release(channel) -> None:
    """The reply consumer is cancelled or its channel closed: later replies are dropped."""
    rc = channel.reply_consumer
    if rc is not None:
        channel.reply_consumer = None
        channel.vhost.reply_channels.pop(rc.token, None)


def rewrite(channel, msg) -> None:
    """A message published with reply-to ``amq.rabbitmq.reply-to`` gets this channel's address."""
    if _NEEDLE not in msg.properties or msg.decoded.reply_to != REPLY_TO:
        return
    rc = channel.reply_consumer
    if rc is None:
        raise PreconditionFailed("fast reply consumer does not exist", 60, 40)
    msg.properties = replace_reply_to(msg.properties, PREFIX + rc.token)
    msg._decoded = None


def _random() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
