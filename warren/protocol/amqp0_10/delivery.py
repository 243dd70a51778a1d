"""The 0-10 ``DeliverySink`` of one session, and its subscriptions' credit (INVENTORY.md §11.10).

A ``message.subscribe`` is a broker ``Consumer`` (tag = the destination) plus a
``Subscription``: its accept and acquire modes and its credit, made by the queue's consume from
the subscription's ``SubscriptionTerms`` (``warren/broker/credit.py``), so that it is kept beside
the queue wherever the queue lives; a session whose queue is in another process holds a
``FarSubscription`` that passes the client's flow commands on. The consumer's ``has_capacity``
(asked by the queue before each delivery) becomes the subscription's: message credit, byte
credit (the message at the head of the queue must fit), then the consumer's own check
(``Consumer.has_capacity``: the transport, via ``SessionSink.can_accept``). Credit is zero after
subscribe and after ``set-flow-mode``; ``message.flow`` adds to it, 0xFFFFFFFF meaning unlimited;
``stop`` zeroes it; ``flush`` delivers what the credit allows now, then zeroes it. In window
mode a transfer the client completes (``session.completed``) gives its message and octets back.

A transfer costs one message and, in octets, its header segment plus its body (what Qpid's
brokers count; a transfer of 8 octets with routing key ``q`` costs 19).

Browsing (acquire-mode not-acquired): the subscription's ``has_capacity`` never takes a message
from the queue; it sends copies of the ready messages it has not sent yet (by queue sequence
number, so each once), as far as the credit goes, and answers False. ``message.acquire`` takes
one of them later (``Queue.take_seq``). Messages paged out to disk are not browsed. A priority
queue's ready messages are not in sequence order (highest priority first): its browser walks
them all and remembers the sequence numbers it has sent instead.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from itertools import islice

from warren.broker.credit import CreditTerms
from warren.codec.amqp0_10.types import encode_command, encode_header
from warren.protocol.amqp0_10.properties import from_basic
from warren.spec.amqp0_10 import MessageTransfer

__all__ = ["SessionSink", "Subscription", "SubscriptionTerms", "FarSubscription", "OUTPUT_BATCH", "UNLIMITED",
           "NO_BODY"]

class _NoBody(bytes):
    """The body of a transfer that came without a body segment: empty, and sent on without one
    (qpid.messaging tells a message without content, None, from an empty one)."""

    __slots__ = ()


NO_BODY = _NoBody()

OUTPUT_BATCH = 1 << 20  # octets queued for one write before deliveries wait (as 0-9-1's sink)
UNLIMITED = 0xFFFFFFFF
CREDIT, WINDOW = 0, 1
ACCEPT_EXPLICIT, ACCEPT_NONE = 0, 1
PRE_ACQUIRED, NOT_ACQUIRED = 0, 1


def _seq_of(entry) -> int:
    return entry[0]


class SubscriptionTerms(CreditTerms):
    """A ``message.subscribe``'s credit terms (``warren/broker/credit.py``): its keeper is a
    ``Subscription`` beside the queue; where the queue lives in another process the session
    holds a ``FarSubscription`` that passes the client's flow commands on to it.
    ``publisher``: the subscribing connection's number, which a no-local queue compares with
    each message's (``qpid_args.no_local``)."""

    KIND = "0-10 subscription"
    # a FarSubscription counts the credit as its keeper does: a new keeper is given what is left
    MOVABLE = True
    __slots__ = ("destination", "accept_mode", "acquire_mode", "command_id", "publisher")

    def __init__(self, destination: str, accept_mode: int, acquire_mode: int, command_id: int, publisher) -> None:
        self.destination = destination
        self.accept_mode = accept_mode
        self.acquire_mode = acquire_mode
        self.command_id = command_id
        self.publisher = publisher

    @property
    def args(self) -> tuple:
        return self.destination, self.accept_mode, self.acquire_mode, self.command_id, self.publisher

    def keep(self, consumer) -> "Subscription":
        session = consumer.channel.session
        if session.publisher_id is None:  # another process's connection, here as a proxy
            session.publisher_id = self.publisher
        return Subscription(self.destination, consumer.sink, consumer, self.accept_mode, self.acquire_mode,
                            self.command_id)

    def far(self, link, consumer, queue) -> "FarSubscription":
        return FarSubscription(self, link, consumer, queue)

    def moved(self, channel, consumer) -> None:
        """The subscription's queue has a new keeper (``consumer.credit``): it gets the flow
        mode and the credit the old one's stand-in counted, and takes its place in the session
        (its destination, and the window of transfers not completed yet)."""
        new = consumer.credit
        old = channel.subscriptions.get(consumer.tag)
        if old is not None and old is not new:
            new.set_mode(old.mode)
            new.add(0, old.messages)
            new.add(1, old.octets)
            for key in [k for k, v in channel.subscriptions.items() if v is old]:
                channel.subscriptions[key] = new
            if channel.window:
                channel.window = {i: (new if sub is old else sub, cost) for i, (sub, cost) in channel.window.items()}
        new.queue.dispatch()


def transfer_commands(destination: str, accept_mode: int) -> tuple:
    """A subscription's message.transfer command segment, the same octets for every transfer
    (the ids are implicit), by acquire mode: pre-acquired, not-acquired (browsed copies)."""
    return tuple(encode_command(MessageTransfer(destination=destination, accept_mode=accept_mode, acquire_mode=mode))
                 for mode in (PRE_ACQUIRED, NOT_ACQUIRED))


class Subscription:
    """The keeper of a subscription's credit, beside its queue (this module's docstring)."""

    OPS = frozenset({"add", "set_mode", "give_back", "flush", "stop"})  # what a FarSubscription passes on
    __slots__ = ("destination", "sink", "consumer", "queue", "accept_mode", "acquire_mode", "mode", "messages",
                 "octets", "command_id", "base_capacity", "browsed_upto", "browsed_seqs", "transfer_commands",
                 "_cost_of")

    def __init__(self, destination: str, sink, consumer, accept_mode: int, acquire_mode: int,
                 command_id: int) -> None:
        self.destination = destination
        self.sink = sink  # the consumer's channel's: a session's SessionSink, or a proxy's (warren/spread)
        self.consumer = consumer
        self.queue = consumer.queue
        self.accept_mode = accept_mode
        self.acquire_mode = acquire_mode
        self.mode = WINDOW  # the default before any set-flow-mode (§11.10)
        self.messages: int | None = 0  # credit left; None = unlimited
        self.octets: int | None = 0
        self.command_id = command_id  # the subscribe's id (an exception about it names it)
        self.base_capacity = consumer.has_capacity
        self.browsed_upto = 0  # queue seq of the last message browsed
        self.browsed_seqs: set | None = None  # a priority queue's browser: the seqs sent
        self.transfer_commands = transfer_commands(destination, accept_mode)
        self._cost_of = (None, 0)  # (message, cost): the last cost computed
        consumer.has_capacity = self.browse if acquire_mode == NOT_ACQUIRED else self.has_capacity

    # --- credit ------------------------------------------------------------------------------

    def cost(self, msg) -> int:
        """Octets of credit a transfer of ``msg`` takes: its header segment and body."""
        cached = self._cost_of
        if cached[0] is msg:
            return cached[1]
        cost = transfer_cost(msg)
        self._cost_of = (msg, cost)
        return cost

    def has_capacity(self) -> bool:
        m = self.messages
        if m is not None and m <= 0:
            return False
        if self.octets is not None:
            ready = self.queue.ready
            if ready and self.cost(ready[0][1]) > self.octets:
                return False
        return self.base_capacity()

    def _fits(self, msg) -> bool:
        m = self.messages
        if m is not None and m <= 0:
            return False
        return self.octets is None or self.cost(msg) <= self.octets

    def charge_for(self, msg) -> int:
        """A transfer of ``msg`` went out (or to the consuming process): its credit is spent.
        What it cost, for window mode's give-back."""
        cost = self.cost(msg) if self.octets is not None or self.mode == WINDOW else 0
        spend(self, cost)
        return cost

    def give_back(self, cost: int) -> None:
        """Window mode: a transfer the client completed returns its credit."""
        returned(self, cost)

    def add(self, unit: int, value: int | None) -> None:
        """message.flow: unit 0 messages, 1 octets; None or 0xFFFFFFFF = unlimited."""
        flow_in(self, unit, value)

    def zero(self) -> None:
        self.messages = self.octets = 0

    def set_mode(self, mode: int) -> None:
        self.mode = mode
        self.zero()

    def flush(self) -> None:
        """message.flush: the credit is used on what is there now, then none is left."""
        self.queue.dispatch()
        self.zero()

    def stop(self) -> None:
        self.zero()

    def apply(self, op: str, args: tuple):
        """An operation a ``FarSubscription`` passed on (``OPS``)."""
        if op not in self.OPS:
            raise ValueError(f"not a subscription operation: {op!r}")
        return getattr(self, op)(*args)

    # --- browsing ----------------------------------------------------------------------------

    def browse(self) -> bool:
        """has_capacity of a not-acquired subscription: send copies, take nothing."""
        sink = self.sink
        if not sink.can_accept():
            return False
        ready = self.queue.ready
        if type(ready) is not deque:
            return self._browse_unordered(ready)
        start = bisect_right(ready, self.browsed_upto, key=_seq_of) if ready else 0
        for seq, msg, redelivered, _ in islice(ready, start, None):
            if not self._fits(msg) or not sink.can_accept():
                break
            self.browsed_upto = seq
            sink.browse(self, seq, msg, redelivered)
        return False

    def _browse_unordered(self, ready) -> bool:
        """browse() over ready messages not in seq order (a priority queue's, highest first)."""
        seen = self.browsed_seqs
        if seen is None:
            seen = self.browsed_seqs = set()
        elif len(seen) > 2 * len(ready) + 64:  # forget what has left the queue
            seen.intersection_update(e[0] for e in ready)
        sink = self.sink
        for seq, msg, redelivered, _ in ready:  # browse() sends copies: nothing leaves ready meanwhile
            if seq in seen:
                continue
            if not self._fits(msg) or not sink.can_accept():
                break
            seen.add(seq)
            sink.browse(self, seq, msg, redelivered)
        return False


class FarSubscription:
    """A subscription to a queue another process holds (``--worker-mode queues``): its credit is
    kept there, by a ``Subscription`` beside the queue. What the client says of the credit
    (flow, flow mode, window completions, flush, stop) is passed on through ``link``; the
    transfers that process sends are written here as a local subscription's are
    (``SessionSink``), and cost what the keeper charged for them. It counts the credit as the
    keeper does (``messages``, ``octets``), by what the client said and the transfers that came,
    so that a new keeper (a replicated queue's next leader) is given what the client has left
    (``SubscriptionTerms.moved``)."""

    __slots__ = ("destination", "consumer", "queue", "accept_mode", "acquire_mode", "mode", "command_id",
                 "transfer_commands", "link", "messages", "octets")

    def __init__(self, terms: SubscriptionTerms, link, consumer, queue) -> None:
        self.destination = terms.destination
        self.consumer = consumer
        self.queue = queue  # the queue's handle: a browsed copy is acquired through it
        self.accept_mode = terms.accept_mode
        self.acquire_mode = terms.acquire_mode
        self.command_id = terms.command_id
        self.mode = WINDOW
        self.transfer_commands = transfer_commands(terms.destination, terms.accept_mode)
        self.link = link
        self.messages: int | None = 0  # the credit left as the keeper counts it; None = unlimited
        self.octets: int | None = 0

    def charge_for(self, msg) -> int:
        """A transfer came (the keeper charged it): what it cost, for window mode's give-back."""
        cost = transfer_cost(msg) if self.octets is not None or self.mode == WINDOW else 0
        spend(self, cost)
        return cost

    def add(self, unit: int, value: int | None) -> None:
        flow_in(self, unit, value)
        self.link.tell("add", unit, value)

    def set_mode(self, mode: int) -> None:
        self.mode = mode
        self.messages = self.octets = 0
        self.link.tell("set_mode", mode)

    def give_back(self, cost: int) -> None:
        returned(self, cost)
        self.link.tell("give_back", cost)

    def flush(self):
        """An awaitable, done once the transfers the flush allowed are here (none is left then)."""
        self.messages = self.octets = 0
        return self.link.ask("flush")

    def stop(self):
        self.messages = self.octets = 0
        return self.link.ask("stop")


# The credit arithmetic a Subscription (the keeper) and a FarSubscription (counting as the keeper
# does) share, on their ``messages`` and ``octets`` (None: unlimited)

def spend(sub, cost: int) -> None:
    """A transfer costing ``cost`` octets went out."""
    if sub.messages is not None:
        sub.messages = max(0, sub.messages - 1)
    if sub.octets is not None:
        sub.octets = max(0, sub.octets - cost)


def returned(sub, cost: int) -> None:
    """Window mode: a completed transfer's credit comes back."""
    if sub.messages is not None:
        sub.messages += 1
    if sub.octets is not None:
        sub.octets += cost


def flow_in(sub, unit: int, value: int | None) -> None:
    """message.flow: unit 0 messages, 1 octets (``flowed``)."""
    if unit == 0:
        sub.messages = flowed(sub.messages, value)
    else:
        sub.octets = flowed(sub.octets, value)


def flowed(current: int | None, value: int | None) -> int | None:
    """A credit after message.flow adds ``value`` to it: None or 0xFFFFFFFF make it unlimited
    (None); an unlimited one stays so."""
    if value is None or value == UNLIMITED:
        return None
    return None if current is None else min(current + value, UNLIMITED - 1)


def transfer_cost(msg) -> int:
    """Octets of credit a transfer of ``msg`` takes: its header segment and body."""
    return len(header_segment(msg, False)) + len(msg.body)


# Encoded header segments by (property list, exchange, routing key, redelivered): deliveries of
# messages published alike (the usual stream) share one instead of mapping and encoding each
# message's properties again. Bounded in entries, and long property lists are not kept.
_HEADERS: dict = {}
_HEADERS_MAX = 4096
_HEADERS_MAX_PROPERTIES = 512


def header_segment(msg, redelivered: bool) -> bytes:
    """The 0-10 header segment (delivery-properties, message-properties) of a delivery."""
    properties = msg.properties
    key = (properties, msg.exchange, msg.routing_key, redelivered)
    cacheable = type(properties) is bytes and len(properties) <= _HEADERS_MAX_PROPERTIES
    if cacheable:
        segment = _HEADERS.get(key)
        if segment is not None:
            return segment
    dp, mp = from_basic(msg.decoded, msg.exchange, msg.routing_key, redelivered)
    segment = encode_header((dp,) if mp is None else (dp, mp))
    if cacheable:
        if len(_HEADERS) >= _HEADERS_MAX:
            _HEADERS.clear()
        _HEADERS[key] = segment
    return segment


class SessionSink:
    """Deliveries of one session's ``BrokerChannel`` as message.transfer commands."""

    __slots__ = ("handler", "conn", "io", "number", "channel", "subscriptions", "flow_active")

    def __init__(self, handler, number: int) -> None:
        self.handler = handler  # the connection handler: its ``writable``
        self.conn = handler.conn  # the sans-IO 0-10 ServerConnection
        self.io = handler.io
        self.number = number
        self.channel = None  # the session's channel (set by it)
        self.subscriptions: dict[str, Subscription] = {}  # destination -> subscription
        self.flow_active = True  # False once the session is gone (0-10 has no channel.flow)

    def can_accept(self) -> bool:
        return self.flow_active and self.handler.writable and self.conn.out_bytes < OUTPUT_BATCH

    def _send(self, sub: Subscription, msg, redelivered: bool, acquire_mode: int) -> int:
        body = msg.body
        transfer_id = self.conn.send_encoded_transfer(self.number, sub.transfer_commands[acquire_mode],
                                                      header_segment(msg, redelivered),
                                                      None if body is NO_BODY else body)
        cost = sub.charge_for(msg)
        if sub.mode == WINDOW:
            self.channel.window[transfer_id] = (sub, cost)
        self.io.want_flush()
        return transfer_id

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        sub = self.subscriptions.get(consumer.tag)
        if sub is None:  # cannot happen: a consumer of this channel always has its subscription
            return
        transfer_id = self._send(sub, message, redelivered, PRE_ACQUIRED)
        if not consumer.no_ack:
            self.channel.transfers[transfer_id] = tag

    def browse(self, sub: Subscription, seq: int, message, redelivered: bool) -> None:
        transfer_id = self._send(sub, message, redelivered, NOT_ACQUIRED)
        self.channel.browsed[transfer_id] = (sub.queue, seq)

    def returned(self, message) -> None:
        pass  # 0-10 transfers are never mandatory: an unroutable message is dropped

    def cancelled(self, consumer_tag: str) -> None:
        """The queue went away under a subscription: Qpid's resource-deleted exception."""
        sub = self.subscriptions.pop(consumer_tag, None)
        if sub is not None and self.flow_active:
            self.handler.session_exception(self.number, sub.command_id, 408,
                                           f"queue '{sub.queue.name}' of subscription '{consumer_tag}' was deleted")

    def stop(self) -> None:
        self.flow_active = False
