"""The AMQP 1.0 connection handler: events of the sans-IO 1.0 connection in, broker operations out.

The asyncio glue (``warren/server/connection.py``) feeds it the events of
``warren.protocol.amqp1_0.connection.ServerConnection`` (``handle``) and calls ``fail``,
``before_flush``, ``shutdown`` and ``connection_lost``, as for 0-9-1 and 0-10. It is the broker's
``BrokerConnection`` (the login, the vhost with its limits and permissions) plus 1.0's own:

* the login: SASL PLAIN against Warren's users; EXTERNAL on TLS with a verified client
  certificate (the user its certificate names, as 0-9-1's); ANONYMOUS (or no SASL layer at all)
  only with ``--anonymous-user``, logged in as that user, as 0-9-1 and 0-10 do;
* the virtual host: ``open``'s hostname ``vhost:NAME`` (RabbitMQ's convention), else the default;
* each session is a ``SessionChannel`` (a ``BrokerChannel``); each link on it is a consumer (the
  client receives from a queue: ``Outgoing``) or a destination (the client sends: ``Incoming``),
  named by RabbitMQ's v2 or v1 addresses (``addresses.py``);
* outcomes the client gives our deliveries, as RabbitMQ 4 maps them: accepted = ack; rejected =
  reject without requeue (dead-lettered where the queue says so); released = requeue; modified =
  requeue, or with undeliverable-here dead-lettered; settled without an outcome = accepted;
* what the client sends: accepted once routed (a durable message to a durable queue once on
  disk, as 0-9-1 confirms: ``Confirms``), released when no queue took it, rejected when a queue
  refused it (x-overflow reject-publish) or the message is refused (decode error, a ``to`` that
  names nothing, a user-id that is not the login's).

A broker refusal of a link (a missing queue, no permission) detaches it with the condition its
error maps to (``CONDITIONS``); a session's limit ends the session; the rest closes the
connection. Our own bugs are ``amqp:internal-error`` with a traceback in the log.
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from warren.broker import reply_to
from warren.broker.channel import BrokerChannel, PublishOutcome
from warren.access.login import vhost_of_hostname
from warren.broker.connection import BrokerConnection
from warren.codec.amqp1_0.types import Array, DecodeError, Symbol, as_list
from warren.errors import (AccessRefused, AMQPError, ConnectionAccessRefused, ContentTooLarge, NotAllowed, NotFound,
                           NotImplemented_, PreconditionFailed, ResourceError, ResourceLocked)
from warren.protocol.amqp1_0 import events as ev
from warren.broker.node import node_name
from warren.protocol.amqp1_0 import management
from warren.protocol.amqp1_0.addresses import AddressError, parse_source, parse_target
from warren.broker.later import is_later, run, settled
from warren.protocol.amqp1_0.credit import LinkTerms
from warren.protocol.amqp1_0.filters import CAPABILITY as FILTEX_CAPABILITY, SQL_CAPABILITY, parse_filter
from warren.protocol.amqp1_0.message import annotations_as_headers, from_broker, parse, to_broker, view
from warren.protocol.amqp1_0.session import serial_diff
from warren.spec import amqp1_0 as spec

__all__ = ["ConnectionHandler", "SessionChannel", "SessionSink", "CONDITIONS"]

log = logging.getLogger("warren.session")

_STREAM_CAPABILITIES = [Symbol(FILTEX_CAPABILITY), Symbol(SQL_CAPABILITY)]  # the filters a stream receiver has
SCAN_TURN = 4096  # messages a stream link's property filter may skip in a row before the others get a turn
TEMPORARY_QUEUE = "temporary-queue"  # RabbitMQ 4.1's capability of a dynamic source or target
VOLATILE_QUEUE = "rabbitmq:volatile-queue"  # RabbitMQ 4.2's: a dynamic source that is Direct Reply-To
OUTPUT_BATCH = 1 << 20  # octets queued for one write before deliveries wait (as 0-9-1's and 0-10's sinks)
MAX_PENDING_REPLIES = 1000  # management responses kept while the client gives their link no credit
E, LE = spec.AmqpError, spec.LinkError
ACCEPTED, RELEASED = spec.Accepted(), spec.Released()
# a broker refusal -> the 1.0 error condition it is answered with
CONDITIONS = {NotFound: E.NOT_FOUND, AccessRefused: E.UNAUTHORIZED_ACCESS, ResourceLocked: E.RESOURCE_LOCKED,
              PreconditionFailed: E.PRECONDITION_FAILED, NotAllowed: E.NOT_ALLOWED,
              NotImplemented_: E.NOT_IMPLEMENTED, ResourceError: E.RESOURCE_LIMIT_EXCEEDED,
              ContentTooLarge: LE.MESSAGE_SIZE_EXCEEDED, ConnectionAccessRefused: E.UNAUTHORIZED_ACCESS}


# RabbitMQ 4 is the reference for 1.0 (RabbitMQ 3.10, which 0-9-1 announces, had no 1.0 core):
# its product and version in our open, Warren's own in platform and information
# (docs/compatibility.md); RabbitMQ's AMQP 1.0 clients refuse a server that is not RabbitMQ 4.
ANNOUNCED_VERSION_1_0 = "4.2.0"


def open_properties(broker) -> dict:
    props = broker.server_properties()
    return {"product": props["product"], "version": ANNOUNCED_VERSION_1_0, "platform": props["platform"],
            "information": props["information"].replace(props["version"], ANNOUNCED_VERSION_1_0)}


def condition_of(error: AMQPError):
    for cls in type(error).__mro__:
        condition = CONDITIONS.get(cls)
        if condition is not None:
            return condition
    return E.INTERNAL_ERROR


def _rejected(condition, text: str):
    value = condition.value if hasattr(condition, "value") else condition
    return spec.Rejected(error=spec.Error(condition=Symbol(value), description=text))


class Outgoing:
    """A link the broker sends on: a consumer of one queue. On a stream (``stream``) the
    consumer always acknowledges (a stream's reader needs it): a pre-settled link (``settled``)
    is settled here at once, and the link's property filter expressions (``match``) are applied
    here, a message that does not match being settled unseen (``skipped``: how many in a row;
    ``paused``: waiting for the next write after ``SCAN_TURN`` of them). ``dynamic``: the
    temporary queue the link created, deleted when it detaches. ``overflow``: deliveries from
    another worker's queue that came after the client took its credit back, written at its
    next grant (warren/protocol/amqp1_0/credit.py)."""

    __slots__ = ("handle", "consumer", "queue", "stream", "settled", "match", "skipped", "paused", "dynamic",
                 "overflow")

    def __init__(self, handle: int, consumer, queue: str, stream: bool = False, settled: bool = False,
                 match=None, dynamic: bool = False) -> None:
        self.handle, self.consumer, self.queue = handle, consumer, queue
        self.stream, self.settled, self.match = stream, settled, match
        self.skipped = 0
        self.paused = False
        self.dynamic = dynamic
        self.overflow: list = []


class Volatile:
    """A dynamic receiver with RabbitMQ 4.2's ``rabbitmq:volatile-queue`` capability: Direct
    Reply-To's reply consumer (``consumer``, warren/broker/reply_to.py). Replies go out settled
    while the link has credit; one that finds none is dropped (``dropped``), as RabbitMQ's
    volatile queue drops it: nothing is kept for later."""

    __slots__ = ("handle", "consumer", "dropped")

    def __init__(self, handle: int, consumer) -> None:
        self.handle, self.consumer = handle, consumer
        self.dropped = 0


class Incoming:
    """A link the client sends on: where its messages go (``exchange`` None: each message's
    ``to``; ``management``: requests to the management node)."""

    __slots__ = ("handle", "name", "exchange", "key", "management")

    def __init__(self, handle: int, name: str, exchange: str | None, key: str | None, management: bool = False) -> None:
        self.handle, self.name, self.exchange, self.key = handle, name, exchange, key
        self.management = management


class Replies:
    """The management node's link to the client: responses wait here for credit."""

    __slots__ = ("handle", "pending")

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.pending: list[bytes] = []


class SessionSink:
    """Deliveries of one session's channel as transfers on the links that asked for them."""

    __slots__ = ("handler", "conn", "io", "number", "channel", "links", "flow_active", "dynamic_targets", "volatile")

    def __init__(self, handler, number: int) -> None:
        self.handler = handler
        self.conn = handler.conn
        self.io = handler.io
        self.number = number
        self.channel = None
        self.links: dict[str, Outgoing] = {}  # consumer tag -> link
        self.flow_active = True
        self.dynamic_targets: dict[int, str] = {}  # handle -> the temporary queue a dynamic target created
        self.volatile: dict[str, Volatile] = {}  # reply consumer tag -> its Direct Reply-To link

    def can_accept(self) -> bool:
        return self.flow_active and self.handler.writable and self.conn.out_bytes < OUTPUT_BATCH

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        link = self.links.get(consumer.tag)
        if link is None:
            replies = self.volatile.get(consumer.tag)
            if replies is not None and replies.consumer is consumer:
                self._deliver_reply(replies, message)
            return
        credit = consumer.credit
        if credit.far:  # from another worker: sent under the credit it knew of
            if self.conn.credit(self.number, link.handle) <= 0:
                link.overflow.append((consumer, tag, redelivered, message))
                return
            credit.charge_for(message)
        if link.stream:
            self._deliver_stream(link, consumer, tag, redelivered, message)
            return
        payload = from_broker(message, redelivered)
        delivery_id = self.conn.send_transfer(self.number, link.handle, tag.to_bytes(8, "big"), payload, consumer.no_ack)
        if not consumer.no_ack:
            self.channel.deliveries[delivery_id] = tag
        self.io.want_flush()

    def _deliver_reply(self, link: Volatile, message) -> None:
        if not self.flow_active or self.conn.credit(self.number, link.handle) <= 0:
            link.dropped += 1  # no credit: a volatile queue keeps nothing (RabbitMQ 4.2 drops it too)
            return
        self.conn.send_transfer(self.number, link.handle, b"", from_broker(message, False), True)
        self.io.want_flush()

    def _deliver_stream(self, link: Outgoing, consumer, tag: int, redelivered: bool, message) -> None:
        v = view(message, redelivered)
        match = link.match
        if match is not None and not match.matches(v.properties, v.application, v.header, v.annotations):
            self.channel.ack_run([tag])  # not for this link: the stream's reader gets its credit back
            if consumer.credit.far:  # the client's credit was not spent: the owner may send one more
                self.handler.regrant_at_next_write(self.channel, link)
            link.skipped += 1
            if link.skipped >= SCAN_TURN:  # a long run of misses: the other connections get a turn
                link.paused = True
                self.handler.pause_link(self.channel, link)
            return
        link.skipped = 0
        delivery_id = self.conn.send_transfer(self.number, link.handle, tag.to_bytes(8, "big"), v.encode(),
                                              link.settled)
        if link.settled:
            self.channel.ack_run([tag])
        else:
            self.channel.deliveries[delivery_id] = tag
        self.io.want_flush()

    def returned(self, message) -> None:
        pass  # 1.0 publishes are never mandatory: an unroutable message is released instead

    def cancelled(self, consumer_tag: str) -> None:
        """The queue went away under a link: detach it (RabbitMQ: amqp:resource-deleted)."""
        link = self.links.pop(consumer_tag, None)
        if link is not None and self.flow_active:
            log.info("AMQP 1.0 link on connection %s detached: queue '%s' was deleted", self.handler, link.queue)
            self.conn.detach_link(self.number, link.handle, E.RESOURCE_DELETED, f"queue '{link.queue}' was deleted")
            self.io.want_flush()

    def stop(self) -> None:
        self.flow_active = False


class SessionChannel(BrokerChannel):
    """One 1.0 session over the broker."""

    def __init__(self, handler, number: int, sink: SessionSink) -> None:
        super().__init__(handler, number, sink)
        sink.channel = self
        self.conn = handler.conn
        self.deliveries: dict[int, int] = {}  # our delivery-id -> the channel's delivery tag (unsettled)
        self.persisting: list = []  # (publish number, delivery-id) of transfers accepted once on disk
        self.replies: Replies | None = None  # the management node's link of this session, if attached
        self.select_confirms()  # every publish numbered: durable ones are accepted once on disk

    def _confirms_ready(self, confirms) -> None:
        self.session.want_confirm_flush(self)

    def flush_confirms(self) -> None:
        confirms = self.confirms
        if confirms is None or self.closed:
            return
        settled = confirms.settle()
        if not settled or not self.persisting:
            return
        upto = max(n for n, _, _ in settled)
        pending = self.persisting
        i = 0
        while i < len(pending) and pending[i][0] <= upto:
            self.conn.settle_incoming(self.number, pending[i][1], ACCEPTED)
            i += 1
        del pending[:i]

    def settle_range(self, first: int, last: int, state) -> None:
        """The client settled our deliveries first..last with ``state`` (an outcome or None)."""
        deliveries = self.deliveries
        span = serial_diff(last, first)
        if span < 0:
            return
        if span >= len(deliveries):  # a wide range (or a hostile one): walk what is unsettled
            ids = [d for d in deliveries if 0 <= serial_diff(d, first) <= span]
        else:
            ids = [(first + i) & 0xFFFFFFFF for i in range(span + 1)]
        tags = [deliveries.pop(d) for d in ids if d in deliveries]
        if not tags:
            return
        kind = type(state)
        if state is None or kind is spec.Accepted:
            self.ack_run(tags)
        elif kind is spec.Rejected:
            for tag in tags:
                self.reject(tag, False, False)
        elif kind is spec.Modified:
            # its annotations join the message in the queues that keep them (quorum, as RabbitMQ 4)
            annotations = state.message_annotations
            headers = annotations_as_headers(annotations) if isinstance(annotations, dict) else None
            for tag in tags:
                if headers:
                    self.annotate(tag, headers)
                self.reject(tag, False, not state.undeliverable_here)
        else:  # released, received: back to the queue
            for tag in tags:
                self.reject(tag, False, True)

    def close(self) -> None:
        for link in self.sink.volatile.values():  # their replies have nowhere to go now
            reply_to.release_volatile(link.consumer)
        self.sink.volatile.clear()
        super().close()

    def requeue_link(self, consumer) -> None:
        """A link detached: its unsettled deliveries go back to the queue."""
        tags = {entry[4] for entry in self.unacked.values() if entry[3] is consumer}
        if not tags:
            return
        for d in [d for d, tag in self.deliveries.items() if tag in tags]:
            del self.deliveries[d]
        for tag in sorted(tags):
            self.reject(tag, False, True)


class ConnectionHandler(BrokerConnection):
    protocol = "AMQP 1.0"

    def __init__(self, broker, conn, peer: tuple, io, anonymous_user: str | None = None,
                 default_vhost: str = "/", max_message_size: int = 128 << 20) -> None:
        super().__init__(broker, peer, io)
        self.conn = conn  # the sans-IO 1.0 ServerConnection
        self.anonymous_user = anonymous_user
        self.default_vhost = default_vhost
        self.max_message_size = max_message_size
        self._confirming: set[SessionChannel] = set()
        self._paused: list = []  # (channel, Outgoing) of stream links whose filter skipped SCAN_TURN in a row
        # far stream links whose filter settled messages unseen since the last write -> their channel
        self._regrants: dict = {}

    def __str__(self) -> str:
        return super().__str__() + " (AMQP 1.0)"

    # --- events --------------------------------------------------------------------------

    def handle(self, event) -> None:
        handler = _HANDLERS.get(type(event))
        try:
            handler(self, event)
        except Exception:
            log.exception("internal error on AMQP 1.0 connection %s while handling %r", self, event)
            self.note_close("internal error")
            self.conn.close_connection(E.INTERNAL_ERROR, "internal error")
            self._release()
            self.io.close_soon()
        self.io.want_flush()

    def _sasl(self, e: ev.SaslInit) -> None:
        self.mechanism = e.mechanism or "none"
        try:  # PLAIN, EXTERNAL on verified TLS, ANONYMOUS (or no SASL layer) with --anonymous-user
            self.username = self.login(e.mechanism, e.response, self.conn.mechanisms, self.anonymous_user)
        except ConnectionAccessRefused as error:
            if error.throttle_delay:
                self.io.refuse_later(error.throttle_delay, error)
                return
            self._refuse_login(error.log_detail or error.text)
            return
        self.conn.sasl_accept()

    def _refuse_login(self, detail: str) -> None:
        log.warning("connection error on %s: login refused (%s)", self, detail)
        self.note_close(f"{detail} (SASL outcome auth)")
        self.conn.refuse_login()
        self._release()
        self.io.close_after_flush()

    def _open(self, e: ev.OpenRequested) -> None:
        self.client_properties = {str(k): v for k, v in e.properties.items()}
        name = vhost_of_hostname(e.hostname, self.default_vhost)
        try:
            self.open_vhost(name)
        except AMQPError as error:
            missing = isinstance(error, NotAllowed) and name not in self.broker.vhosts
            condition = E.NOT_FOUND if missing else E.UNAUTHORIZED_ACCESS
            log.warning("connection error on %s: vhost '%s' refused: %s", self, name, error.log_detail or error.text)
            self.note_close(f"{error.log_detail or error.text} ({condition.value})")
            self.conn.refuse_open(condition, error.text)
            self._release()
            self.io.close_soon()
            return
        self.conn.properties = open_properties(self.broker)
        self.conn.accept_open()
        self.io.opened()
        self.io.start_heartbeat(self.conn.heartbeat)
        log.info("connection %s opened (client %s)", self, self.client_name)

    def _begun(self, e: ev.SessionBegun) -> None:
        try:
            self.admit_channel()  # the user's max-channels (a session is a channel)
        except AMQPError as error:
            log.warning("session refused on connection %s: %s", self, error.text)
            self.conn.end_session(e.channel, E.RESOURCE_LIMIT_EXCEEDED, error.text)
            return
        self.channels[e.channel] = SessionChannel(self, e.channel, SessionSink(self, e.channel))

    def _ended(self, e: ev.SessionEnded) -> None:
        ch = self.channels.pop(e.channel, None)
        if ch is not None:
            sink = ch.sink
            # the session's links are gone: so are their dynamic queues
            for queue in [out.queue for out in sink.links.values() if out.dynamic] + list(sink.dynamic_targets.values()):
                self._delete_temporary(ch, queue)
            ch.close()

    def _attach(self, e: ev.AttachRequested) -> None:
        channel = self.channels.get(e.channel)
        a = e.attach
        if channel is None:
            self.conn.refuse_attach(e.channel, e.handle, E.RESOURCE_LIMIT_EXCEEDED, "session refused")
            return
        link = self.conn.sessions[e.channel].links[e.handle]
        # the queue and its definitions may be in another process (--worker-mode queues): then
        # the attach is answered later, and nothing more is read from the client meanwhile
        attach = self._attach_outgoing if link.sending else self._attach_incoming
        try:
            context = run(attach(channel, e.handle, a))
        except (AddressError, AMQPError) as error:
            self._link_refused(e, error)
            return
        if not is_later(context):
            link.context = context
            return

        def attached(context, error) -> None:
            if channel.closed:
                return
            if error is None:
                link.context = context
                self._attached_later(channel, context)
            elif isinstance(error, (AddressError, AMQPError)):
                self._link_refused(e, error)
            else:
                log.error("internal error on connection %s attaching link '%s'", self, a.name, exc_info=error)
                self._refuse_link(e, E.INTERNAL_ERROR, "internal error")
            self.io.want_flush()
        self.io.when_done(context, attached)

    def _link_refused(self, e, error) -> None:
        if isinstance(error, AddressError):
            self._refuse_link(e, E.INVALID_FIELD, str(error))
        else:
            self._refuse_link(e, condition_of(error), error.text)

    def _attached_later(self, channel: SessionChannel, context) -> None:
        """A link whose queue is in another worker is attached: the credit the client gave it
        meanwhile goes there, and what was held for it is delivered."""
        if type(context) is Outgoing:
            consumer = context.consumer
            channel.start_consumer(consumer)
            consumer.credit.granted(self.conn.credit(channel.number, context.handle), False)

    def _refuse_link(self, e, condition, text: str) -> None:
        log.warning("AMQP 1.0 link '%s' refused on connection %s: %s %s", e.attach.name, self, condition.value, text)
        self.conn.refuse_attach(e.channel, e.handle, condition, text)

    async def _attach_outgoing(self, channel: SessionChannel, handle: int, a) -> Outgoing:
        source = a.source
        if not isinstance(source, spec.Source):
            raise AddressError("a receiving link needs a source")
        if source.dynamic:
            return await self._attach_dynamic_source(channel, handle, a)
        address = source.address
        if address is None:
            raise AddressError("a receiving link needs a source address or a dynamic source")
        if address == management.NODE_ADDRESS:  # the management node's responses (management.py)
            channel.replies = Replies(handle)
            self.conn.accept_attach(channel.number, handle, a.source, a.target, a.snd_settle_mode)
            return channel.replies
        addr = parse_source(str(address))
        if addr.bind:
            queue, _, _ = await settled(channel.declare_queue("", False, False, True, True, {}))
            await settled(channel.bind_queue(queue, addr.exchange, addr.key, {}))
        elif addr.declare:
            queue, _, _ = await settled(channel.declare_queue(addr.queue, False, True, False, False, {}))
        else:  # it must exist: a passive declare says so (NotFound), as a 0-9-1 client would ask
            queue, _, _ = await settled(channel.declare_queue(addr.queue, True, False, False, False, {}))
        stream = channel.vhost.queue_handle(queue, channel.session).is_stream
        link_filter = parse_filter(source.filter, stream)  # filters.py: a stream's offset and filters
        for name, why in link_filter.refused:  # left out of the answer, as RabbitMQ 4.2 leaves them
            log.warning("AMQP 1.0 link '%s' on connection %s: filter '%s' left out: %s", a.name, self, name, why)
        presettled = a.snd_settle_mode == spec.SenderSettleMode.SETTLED
        out = await self._consume(channel, handle, queue, presettled, stream, link_filter.arguments,
                                  link_filter.match)
        self.conn.accept_attach(channel.number, handle, spec.Source(address=address, default_outcome=RELEASED,
                                                                    outcomes=[Symbol(s) for s in _OUTCOMES],
                                                                    filter=link_filter.effective),
                                a.target, a.snd_settle_mode,
                                offered_capabilities=_STREAM_CAPABILITIES if stream else None)
        return out

    async def _consume(self, channel: SessionChannel, handle: int, queue: str, presettled: bool,
                       stream: bool = False, arguments: dict | None = None, match=None,
                       dynamic: bool = False) -> Outgoing:
        tag = f"amqp1.0-link-{handle}"
        out = Outgoing(handle, None, queue, stream, presettled, match, dynamic)
        number, core_credit = channel.number, self.conn.credit
        terms = LinkTerms(out, lambda: core_credit(number, handle))  # warren/protocol/amqp1_0/credit.py
        if stream:
            # a stream's reader wants a prefetch count and acknowledgements (stream_args.py): the
            # link's credit sets the count (_credit), and a pre-settled link is settled here
            saved = channel.consumer_prefetch_count, channel.consumer_prefetch_size
            channel.set_prefetch(1, 0, False)
            try:
                consumer = channel.consume(queue, tag, False, False, arguments or {}, terms)
            finally:
                channel.set_prefetch(saved[0], saved[1], False)
            consumer = await settled(consumer)
        else:
            consumer = await settled(channel.consume(queue, tag, presettled, False, {}, terms))
        out.consumer = consumer
        channel.sink.links[consumer.tag] = out
        return out

    async def _temporary_queue(self, channel: SessionChannel, terminus) -> str:
        """RabbitMQ 4.1's dynamic terminus: with the capability ``temporary-queue``, an exclusive
        server-named queue, deleted when the link detaches; anything else is refused
        (amqp:not-implemented, as RabbitMQ refuses it)."""
        kind = "source" if isinstance(terminus, spec.Source) else "target"
        capabilities = [str(c) for c in as_list(terminus.capabilities)]
        if TEMPORARY_QUEUE not in capabilities:
            raise NotImplemented_(f"Dynamic {kind} not supported (capabilities {capabilities}: "
                                  f"only '{TEMPORARY_QUEUE}' is)")
        queue, _, _ = await settled(channel.declare_queue("", False, False, True, False, {}))
        return queue

    async def _attach_dynamic_source(self, channel: SessionChannel, handle: int, a):
        capabilities = [str(c) for c in as_list(a.source.capabilities)]
        if VOLATILE_QUEUE in capabilities and a.snd_settle_mode == spec.SenderSettleMode.SETTLED:
            return self._attach_volatile(channel, handle, a)
        queue = await self._temporary_queue(channel, a.source)
        try:
            out = await self._consume(channel, handle, queue, a.snd_settle_mode == spec.SenderSettleMode.SETTLED,
                                      dynamic=True)
        except AMQPError:
            self._delete_temporary(channel, queue)
            raise
        source = spec.Source(address=_queue_address(queue), durable=0, expiry_policy=_LINK_DETACH, timeout=0,
                             dynamic=True, dynamic_node_properties=_dynamic_node_properties(),
                             distribution_mode=Symbol("move"), default_outcome=RELEASED,
                             outcomes=[Symbol(s) for s in _OUTCOMES], capabilities=[Symbol(TEMPORARY_QUEUE)])
        self.conn.accept_attach(channel.number, handle, source, a.target, a.snd_settle_mode)
        return out

    def _attach_volatile(self, channel: SessionChannel, handle: int, a) -> Volatile:
        """RabbitMQ 4.2's Direct Reply-To over 1.0: the link's address is a reply address, which
        requesters put in ``reply-to`` and responders send to (the default exchange routes it)."""
        rc = reply_to.volatile(channel, f"amqp1.0-link-{handle}")
        out = channel.sink.volatile[rc.tag] = Volatile(handle, rc)
        source = spec.Source(address=_queue_address(reply_to.PREFIX + rc.token), durable=0,
                             expiry_policy=_LINK_DETACH, timeout=0, dynamic=True,
                             dynamic_node_properties=_dynamic_node_properties(), distribution_mode=Symbol("move"),
                             capabilities=[Symbol(VOLATILE_QUEUE)])
        self.conn.accept_attach(channel.number, handle, source, a.target, a.snd_settle_mode)
        return out

    def _delete_temporary(self, channel: SessionChannel, queue: str) -> None:
        """Delete a dynamic link's queue (its link detached)."""
        try:
            result = channel.delete_queue(queue, False, False)
        except AMQPError as error:
            log.warning("temporary queue '%s' of connection %s not deleted: %s", queue, self, error.text)
            return
        if is_later(result):  # its owner is another worker, which deletes it: the client waits
            def deleted(_result, error) -> None:
                if error is not None:
                    log.warning("temporary queue '%s' of connection %s not deleted: %s", queue, self, error)
            self.io.when_done(result, deleted)
            return
        for ch, tag in result[1]:
            ch.notify_cancel(tag)

    async def _attach_incoming(self, channel: SessionChannel, handle: int, a) -> Incoming:
        target = a.target
        if isinstance(target, spec.Coordinator):
            raise NotImplemented_("Transactions not supported")  # RabbitMQ 4's words and condition
        if target is not None and not isinstance(target, spec.Target):
            raise AddressError(f"a sending link's target must be a target, not {type(target).__name__}")
        if target is not None and target.dynamic:
            queue = await self._temporary_queue(channel, target)
            answer = spec.Target(address=_queue_address(queue), durable=0, expiry_policy=_LINK_DETACH, timeout=0,
                                 dynamic=True, dynamic_node_properties=_dynamic_node_properties(),
                                 capabilities=[Symbol(TEMPORARY_QUEUE)])
            self.conn.accept_attach(channel.number, handle, a.source, answer, max_message_size=self.max_message_size)
            channel.sink.dynamic_targets[handle] = queue
            return Incoming(handle, a.name, "", queue)
        address = getattr(target, "address", None)
        if address is None:  # the anonymous terminus: each message's "to"
            incoming = Incoming(handle, a.name, None, None)
        elif address == management.NODE_ADDRESS:  # requests to the management node (management.py)
            incoming = Incoming(handle, a.name, None, None, management=True)
        else:
            addr = parse_target(str(address))
            if addr.exchange:  # it must exist (passive declares, as a 0-9-1 client would ask)
                await settled(channel.declare_exchange(addr.exchange, "direct", True, False, False, False, {}))
            if addr.declare:
                await settled(channel.declare_queue(addr.queue, False, True, False, False, {}))
            elif addr.queue is not None:
                await settled(channel.declare_queue(addr.queue, True, False, False, False, {}))
            incoming = Incoming(handle, a.name, addr.exchange, addr.key)
        self.conn.accept_attach(channel.number, handle, a.source, a.target, max_message_size=self.max_message_size)
        return incoming

    def _credit(self, e: ev.CreditChanged) -> None:
        channel = self.channels.get(e.channel)
        if channel is None:
            return
        if e.handle is None:  # the session's window opened: links held for it go on
            for out in list(channel.sink.links.values()):
                if out.consumer.credit.far:
                    self._link_credit(channel, out, e.channel)
            channel.resume_delivery()
            return
        link = self.conn.sessions[e.channel].links.get(e.handle)
        out = link.context if link is not None else None
        if type(out) is Replies:
            self._send_replies(channel, out)
            return
        if type(out) is Volatile:  # nothing waits for its credit: a drain is answered at once
            if e.drain:
                self.conn.drained(e.channel, e.handle)
                self.io.want_flush()
            return
        if type(out) is not Outgoing or out.consumer is None:
            return  # (an attach answered later: _attached_later passes the credit on)
        nothing_left = self._link_credit(channel, out, e.channel, e.drain)
        if not e.drain:
            return
        keeper, credit = out.consumer.credit, self.conn.credit

        def drain(nothing_left) -> None:
            if nothing_left and not channel.closed and credit(e.channel, e.handle) > 0 and not out.overflow:
                self.conn.drained(e.channel, e.handle)
                keeper.drained()
                self.io.want_flush()
        if is_later(nothing_left):
            self.io.when_done(nothing_left, lambda result, error: drain(error is None and result))
        else:
            drain(nothing_left)

    def _link_credit(self, channel: SessionChannel, out: Outgoing, number: int, drain: bool = False):
        """The link's credit (or its session's window) changed: what was held for want of it
        goes first, then the keeper lets through what the credit allows
        (warren/protocol/amqp1_0/credit.py); with ``drain``, whether nothing is left, now or later."""
        credit = self.conn.credit
        while out.overflow and credit(number, out.handle) > 0:
            channel.sink.deliver(*out.overflow.pop(0))
        return out.consumer.credit.granted(credit(number, out.handle), drain)

    def _message(self, e: ev.MessageReceived) -> None:
        channel = self.channels.get(e.channel)
        link = self.conn.sessions[e.channel].links.get(e.handle) if channel is not None else None
        incoming = link.context if link is not None else None
        if type(incoming) is not Incoming:
            return
        self.published = True
        settle = (lambda state: None) if e.settled else (lambda state: self.conn.settle_incoming(e.channel, e.delivery_id, state))
        try:
            sections = parse(e.payload)
        except DecodeError as error:
            log.warning("AMQP 1.0 message refused on connection %s link '%s': %s", self, incoming.name, error)
            settle(_rejected(E.DECODE_ERROR, str(error)))
            return
        if incoming.management:
            self._management_request(channel, sections)
            settle(ACCEPTED)
            return
        exchange, key = incoming.exchange, incoming.key
        props = sections.properties
        if exchange is None:
            to = props.to if props is not None else None
            if to is None:
                settle(_rejected(E.PRECONDITION_FAILED, "a message on the anonymous terminus needs a 'to' address"))
                return
            try:
                addr = parse_target(str(to))
            except AddressError as error:
                settle(_rejected(E.INVALID_FIELD, str(error)))
                return
            exchange, key = addr.exchange, addr.key
        if key is None:
            subject = props.subject if props is not None else None
            key = str(subject) if subject is not None else ""
        properties, body = to_broker(sections)
        try:
            outcome = channel.publish(exchange, key, properties, body, False)
        except AMQPError as error:
            condition = condition_of(error)
            log.warning("AMQP 1.0 message refused on connection %s link '%s': %s %s", self, incoming.name,
                        condition.value, error.text)
            if incoming.exchange is None or isinstance(error, PreconditionFailed):
                settle(_rejected(condition, error.text))
            else:  # the link's own destination went away or is not allowed: the link ends
                self.conn.detach_link(e.channel, e.handle, condition, error.text)
            return
        if e.settled:
            return
        if outcome is PublishOutcome.ROUTED:
            settle(ACCEPTED)
        elif outcome is PublishOutcome.PERSISTING:
            channel.persisting.append((channel.confirms.published_upto, e.delivery_id))
        elif outcome is PublishOutcome.REFUSED:
            settle(_rejected(E.RESOURCE_LIMIT_EXCEEDED, "a queue refused the message (x-overflow reject-publish)"))
        else:
            settle(RELEASED)  # no queue took it (RabbitMQ 4: released)

    def _management_request(self, channel: SessionChannel, sections) -> None:
        p = sections.properties or spec.Properties()
        body = sections.body[0][1] if len(sections.body) == 1 and sections.body[0][0] == 0x77 else None
        method, path = str(p.subject or ""), str(p.to or "")
        result = management.handle_request(channel, method, path, body, node_name())
        if is_later(result):  # answered by another worker first: nothing more is read meanwhile
            def answered(result, error) -> None:
                if error is not None:
                    log.error("internal error on connection %s: management request %s %s", self, method, path,
                              exc_info=error)
                    result = (500, "internal error")
                if not channel.closed:
                    self._management_response(channel, p, method, path, *result)
                    self.io.want_flush()
            self.io.when_done(result, answered)
            return
        self._management_response(channel, p, method, path, *result)

    def _management_response(self, channel: SessionChannel, p, method: str, path: str, code: int, answer) -> None:
        if code >= 400:
            log.warning("management request on connection %s refused: %s %s -> %d %s", self, method, path, code, answer)
        replies = channel.replies
        if replies is None:
            return  # no response link: nothing to answer on
        if len(replies.pending) >= MAX_PENDING_REPLIES:  # a client that asks and never gives credit
            log.warning("management response dropped on connection %s: %d waiting for credit", self, len(replies.pending))
            return
        replies.pending.append(management.response(p.message_id, code, answer))
        self._send_replies(channel, replies)

    def _send_replies(self, channel: SessionChannel, replies: Replies) -> None:
        conn, number = self.conn, channel.number
        while replies.pending and conn.credit(number, replies.handle) > 0:
            conn.send_transfer(number, replies.handle, b"", replies.pending.pop(0), True)

    def _disposition(self, e: ev.DispositionReceived) -> None:
        channel = self.channels.get(e.channel)
        if channel is None:
            return
        try:
            channel.settle_range(e.first, e.last, e.state)
        except AMQPError as error:  # a broker refusal while settling (none expected): logged, the session goes on
            log.warning("AMQP 1.0 disposition on connection %s channel %d refused: %s", self, e.channel, error.text)

    def _detached(self, e: ev.LinkDetached) -> None:
        channel = self.channels.get(e.channel)
        if channel is None:
            return
        self._drop_link(channel, None, e.handle)

    def _drop_link(self, channel: SessionChannel, context, handle: int) -> None:
        if channel.replies is not None and channel.replies.handle == handle:
            channel.replies = None  # the management node's responses have no link any more
        for tag, volatile in list(channel.sink.volatile.items()):
            if volatile.handle == handle:
                del channel.sink.volatile[tag]
                reply_to.release_volatile(volatile.consumer)
        for tag, out in list(channel.sink.links.items()):
            if out.handle == handle:
                del channel.sink.links[tag]
                channel.cancel(tag)
                channel.requeue_link(out.consumer)
                if out.dynamic:
                    self._delete_temporary(channel, out.queue)
        queue = channel.sink.dynamic_targets.pop(handle, None)
        if queue is not None:
            self._delete_temporary(channel, queue)

    def _peer_error(self, e: ev.PeerError) -> None:
        where = "" if e.channel is None else f" channel {e.channel}" + ("" if e.handle is None else f" handle {e.handle}")
        log.warning("AMQP 1.0 protocol error on connection %s%s: %s (answered: %s ended with %s)", self, where, e.text,
                    e.scope, e.condition)
        if e.scope == "connection":
            self.note_close(f"protocol error: {e.text} ({e.condition})")
            self._release()
            if self.conn.closed:
                self.io.close_after_flush()
            else:
                self.io.close_soon()
        elif e.scope == "link" and e.channel in self.channels:
            self._drop_link(self.channels[e.channel], None, e.handle)

    def _closed(self, e: ev.ConnectionClosed) -> None:
        if e.by_peer:
            error = e.error
            self.note_close(f"client closed the connection ({error.condition}: {error.description})" if error is not None
                            else "client closed the connection")
        self._release()
        self.io.close_after_flush()

    # --- glue callbacks ------------------------------------------------------------------

    def fail(self, error: AMQPError, channel: int | None = None, close_code: int | None = None) -> None:
        """Answer a refusal no event of the moment caused: a failed login after the throttle's
        delay, or anything else (the connection closes with the error's condition)."""
        if isinstance(error, ConnectionAccessRefused):
            self._refuse_login(error.log_detail or error.text)
            self.io.want_flush()
            return
        condition = condition_of(error)
        log.warning("connection error on %s: %s %s", self, condition.value, error.text)
        self.note_close(f"{error.log_detail or error.text} ({condition.value})")
        self.conn.close_connection(condition, error.text)
        self._release()
        self.io.close_soon()
        self.io.want_flush()

    def want_flush(self) -> None:
        self.io.want_flush()

    def want_confirm_flush(self, channel: SessionChannel) -> None:
        self._confirming.add(channel)
        self.io.want_flush()

    def pause_link(self, channel: SessionChannel, link: Outgoing) -> None:
        """A stream link's filter skipped SCAN_TURN messages in a row: it goes on at the next write."""
        self._paused.append((channel, link))
        self.io.want_flush()

    def regrant_at_next_write(self, channel: SessionChannel, link: Outgoing) -> None:
        """A stream link reading another worker's stream settled a message its filter refused,
        which took none of the client's credit: the owner may send one more. Told at the next
        write, once for all the link's misses of the batch: one ``limit`` message, not one each
        (``FarLinkCredit.granted`` tells written + credit, which covers every miss so far)."""
        self._regrants[link] = channel
        self.io.want_flush()

    def before_flush(self) -> bool:
        """Accept the transfers whose messages reached the disk (one pass per write batch), tell
        other workers the credit their streams' filtered links got back, and let the stream
        links a filter paused read on."""
        if self._regrants:
            regrants, self._regrants = self._regrants, {}
            for link, channel in regrants.items():
                if channel.closed or channel.sink.links.get(link.consumer.tag) is not link:
                    continue  # detached meanwhile: its consumer and credit are gone
                link.consumer.credit.granted(self.conn.credit(channel.number, link.handle), False)
        if self._paused:
            paused, self._paused = self._paused, []
            for channel, link in paused:
                link.paused = False
                link.skipped = 0
                if channel.closed or channel.sink.links.get(link.consumer.tag) is not link:
                    continue
                channel.start_consumer(link.consumer)
                if link.consumer.credit.nothing_left():
                    self.conn.drained(channel.number, link.handle)
        if self._confirming:
            for ch in self._confirming:
                ch.flush_confirms()
            self._confirming.clear()
            return True
        return False

    def shutdown(self, reply_text: str = "broker shutdown") -> None:
        self.note_close(f"{reply_text} (amqp:connection:forced)")
        self.conn.close_connection(spec.ConnectionError.CONNECTION_FORCED, reply_text)
        self._release()
        self.io.want_flush()


def _queue_address(queue: str) -> str:
    return "/queues/" + quote(queue, safe="")


def _dynamic_node_properties() -> dict:
    """What a dynamic node is (part 3 §3.5.9), as RabbitMQ answers: deleted on close, move only."""
    return {Symbol("lifetime-policy"): spec.DeleteOnClose(),
            Symbol("supported-dist-modes"): Array([Symbol("move")], type="symbol")}


_LINK_DETACH = Symbol("link-detach")
_OUTCOMES = ("amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list")
_HANDLERS = {
    ev.SaslInit: ConnectionHandler._sasl, ev.OpenRequested: ConnectionHandler._open,
    ev.SessionBegun: ConnectionHandler._begun, ev.SessionEnded: ConnectionHandler._ended,
    ev.AttachRequested: ConnectionHandler._attach, ev.CreditChanged: ConnectionHandler._credit,
    ev.MessageReceived: ConnectionHandler._message, ev.DispositionReceived: ConnectionHandler._disposition,
    ev.LinkDetached: ConnectionHandler._detached, ev.PeerError: ConnectionHandler._peer_error,
    ev.ConnectionClosed: ConnectionHandler._closed,
}
