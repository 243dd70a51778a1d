"""One AMQP channel on the broker side: the handler of every channel-level method.

``handle_<class>_<method>(m)`` handles one method; ``HANDLERS`` maps method ids to them, built
from the names below. Handlers raise ``warren.errors`` exceptions to refuse; the session turns
them into channel.close (soft) or connection.close (hard). Entity rules (what may be declared,
bound, deleted) live in ``vhost.py``; this file owns what belongs to the channel: consumers,
deliveries and their tags, prefetch, publisher confirms and transactions.

Prefetch follows RabbitMQ (INVENTORY.md §10.6): basic.qos with global=0 sets the limits of
consumers created afterwards, global=1 a limit shared by the channel's consumers; both apply.
prefetch-size is honoured as the spec's byte window (RabbitMQ refuses it with 540).
"""

from __future__ import annotations

import logging
import os
import sys
import base64
from collections import defaultdict

from warren.broker import authz, reply_to
from warren.broker.limits import NAMED_METHODS, NO_LIMITS, check_names
from warren.broker.confirms import Confirms
from warren.broker.consumer import Consumer
from warren.broker.message import Message
from warren.broker.queue import REFUSED
from warren.codec.properties import EXPIRATION_FLAG, REPLY_TO_FLAG, USER_ID_FLAG
from warren.errors import (
    AccessRefused, NotAllowed, NotFound, NotImplemented_, PreconditionFailed,
)
from warren.metrics.totals import TOTALS
from warren.protocol.dialects import EXCHANGE_BOUND
from warren.spec import amqp0_9_1 as spec

__all__ = ["Channel", "HANDLERS"]

log = logging.getLogger("warren.channel")


# the properties acted on at publish time, tested one octet of the flag word at a time
_USER_ID_FLAG = USER_ID_FLAG & 0xFF  # low octet
_EXPIRATION_FLAG_HI = EXPIRATION_FLAG >> 8  # high octet
_REPLY_TO_FLAG_HI = REPLY_TO_FLAG >> 8
_CHECKED_FLAGS_HI = _EXPIRATION_FLAG_HI | _REPLY_TO_FLAG_HI


class Channel:
    # the HTTP API's message_stats (warren/management/api/stats.py, also read by warren/metrics):
    # plain increments; the deliveries and gets are ``next_tag - 1``
    stats_publish = 0
    stats_ack = 0
    # unroutable publishes (off the routed path; Prometheus' rabbitmq_global_messages_unroutable_*)
    stats_unroutable_dropped = 0
    stats_unroutable_returned = 0

    def __init__(self, session, number: int, sink) -> None:
        self.session = session
        self.conn = session.conn  # the sans-IO protocol connection
        self.vhost = session.vhost
        self.number = number
        self.sink = sink  # where deliveries go (a DeliverySink, warren/broker/delivery.py)
        self.consumers: dict[str, Consumer] = {}
        # delivery tag -> (queue, seq, message, consumer or None for basic.get, delivery tag)
        self.unacked: dict[int, tuple] = {}
        self.next_tag = 1
        # basic.qos: limits for consumers created from now on, and the channel-wide limits
        self.consumer_prefetch_count = 0
        self.consumer_prefetch_size = 0
        self.prefetch_count = 0
        self.prefetch_size = 0
        self.consumer_unacked = 0  # deliveries to consumers (not basic.get) awaiting ack
        self.consumer_unacked_bytes = 0
        self.last_queue = ""  # 0-9-1: an empty queue name means the last one declared here
        self.confirms: Confirms | None = None  # publisher confirms (confirm.select): all their state
        self.commit_waits_for = 0  # tx.commit-ok held until this sync completes
        # transactions
        self.tx_mode = False
        self.tx_publishes: list[tuple] = []
        self.tx_settles: list[tuple] = []
        self.reply_consumer = None  # direct reply-to (warren/broker/reply_to.py)
        self.closed = False
        # the exchanges this channel may publish to (authz.py): the last one, then by name; the
        # broker empties both on any change of users, vhosts or permissions
        self.publish_allowed = authz.UNCHECKED
        self.publish_checked: dict = {}

    # --- dispatch ------------------------------------------------------------------------

    @property
    def flow_active(self) -> bool:
        """Whether the client lets deliveries flow (channel.flow; the HTTP API's channel state)."""
        return self.sink.flow_active

    # the confirm counts the HTTP API and the metrics read
    @property
    def confirm_mode(self) -> bool:
        return self.confirms is not None

    @property
    def publish_seq(self) -> int:
        return self.confirms.published_upto if self.confirms is not None else 0

    @property
    def confirmed_upto(self) -> int:
        return self.confirms.confirmed_upto if self.confirms is not None else 0

    def handle_method(self, method) -> None:
        handler = HANDLERS.get(method.INDEX)
        if handler is None:
            raise NotImplemented_(f"{method.NAME} is not supported", method.CLASS_ID, method.METHOD_ID)
        if method.INDEX in NAMED_METHODS:
            check_names(method)  # names that are not UTF-8: 501 as RabbitMQ (broker/limits.py)
        handler(self, method)

    def _reply(self, method) -> None:
        self.conn.send_method(self.number, method)
        self.session.want_flush()

    # --- delivery (called by Queue.dispatch) ----------------------------------------------

    def can_deliver_acked(self) -> bool:
        """Room for one more delivery that will wait for an ack: the transport's, then the
        channel's prefetch (basic.qos global)."""
        if not self.sink.can_accept():
            return False
        if self.prefetch_count and self.consumer_unacked >= self.prefetch_count:
            return False
        if self.prefetch_size and self.consumer_unacked_bytes >= self.prefetch_size:
            return False
        return True

    def deliver(self, consumer: Consumer, queue, seq: int, msg: Message, redelivered: bool) -> None:
        tag = self.next_tag
        self.next_tag = tag + 1
        queue.stats_deliver += 1
        if redelivered:
            queue.stats_redeliver += 1
        if not consumer.no_ack:
            self.unacked[tag] = (queue, seq, msg, consumer, tag)
            size = len(msg.body)
            consumer.unacked += 1
            consumer.unacked_bytes += size
            self.consumer_unacked += 1
            self.consumer_unacked_bytes += size
        self.sink.deliver(consumer, tag, redelivered, msg)

    def resume_delivery(self) -> None:
        """Capacity may have appeared (ack, qos, flow, writable transport): offer it to queues."""
        for q in {c.queue for c in self.consumers.values()}:
            q.dispatch()

    # --- channel class ---------------------------------------------------------------------

    def handle_channel_flow(self, m) -> None:
        self.sink.flow_active = m.active
        self._reply(spec.ChannelFlowOk(m.active))
        if m.active:
            self.resume_delivery()

    def handle_channel_flow_ok(self, m) -> None:
        pass  # we never send channel.flow; a stray flow-ok is harmless

    def handle_access_request(self, m) -> None:
        # 0-8/0-9 clients ask for a ticket; RabbitMQ grants ticket 1 and ignores it afterwards
        self._reply(spec.AccessRequestOk(1))

    # --- exchange class --------------------------------------------------------------------

    def handle_exchange_declare(self, m) -> None:
        authz.exchange_declare(self, m)
        self.vhost.declare_exchange(m.exchange, m.type, m.passive, m.durable, m.auto_delete,
                                    m.internal, m.arguments)
        if not m.nowait:
            self._reply(spec.ExchangeDeclareOk())

    def handle_exchange_delete(self, m) -> None:
        authz.exchange_delete(self, m)
        self.vhost.delete_exchange(m.exchange, m.if_unused)
        if not m.nowait:
            self._reply(spec.ExchangeDeleteOk())

    def handle_exchange_bind(self, m) -> None:
        authz.exchange_bind(self, m)
        self.vhost.bind_exchange(m.destination, m.source, m.routing_key, m.arguments)
        if not m.nowait:
            self._reply(spec.ExchangeBindOk())

    def handle_exchange_unbind(self, m) -> None:
        authz.exchange_bind(self, m)
        self.vhost.unbind_exchange(m.destination, m.source, m.routing_key, m.arguments)
        if not m.nowait:
            self._reply(spec.ExchangeUnbindOk())

    # --- queue class -----------------------------------------------------------------------

    def _queue(self, name: str):
        return self.vhost.queue(name or self.last_queue, self.session)

    def handle_queue_declare(self, m) -> None:
        if m.queue.startswith(reply_to.REPLY_TO):
            return reply_to.declare(self, m)
        authz.queue_declare(self, m)
        q = self.vhost.declare_queue(self.session, m.queue, m.passive, m.durable, m.exclusive,
                                     m.auto_delete, m.arguments)
        if q.exclusive_owner is self.session:
            self.session.exclusive_queues.add(q)
        q.touch()  # x-expires: a declare (passive too) is a use
        self.last_queue = q.name
        if not m.nowait:
            self._reply(spec.QueueDeclareOk(q.name, q.message_count, len(q.consumers)))

    def handle_queue_bind(self, m) -> None:
        authz.queue_bind(self, m)
        self.vhost.bind_queue(self._queue(m.queue), m.exchange, m.routing_key, m.arguments)
        if not m.nowait:
            self._reply(spec.QueueBindOk())

    def handle_queue_unbind(self, m) -> None:
        authz.queue_bind(self, m)
        self.vhost.unbind_queue(self.session, m.queue or self.last_queue, m.exchange, m.routing_key, m.arguments)
        self._reply(spec.QueueUnbindOk())

    def handle_queue_purge(self, m) -> None:
        authz.queue_read(self, m)
        n = self._queue(m.queue).purge()
        if not m.nowait:
            self._reply(spec.QueuePurgeOk(n))

    def handle_queue_delete(self, m) -> None:
        authz.queue_delete(self, m)
        name = m.queue or self.last_queue
        if name not in self.vhost.queues:
            # idempotent, as RabbitMQ 3.x: deleting a missing queue succeeds with 0 messages
            if not m.nowait:
                self._reply(spec.QueueDeleteOk(0))
            return
        q = self._queue(name)
        if m.if_unused and q.consumers:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{self.vhost.name}' in use")
        if m.if_empty and q.message_count:
            raise PreconditionFailed(f"queue '{q.name}' in vhost '{self.vhost.name}' is not empty")
        # delete-ok goes before the basic.cancel of this connection's consumers of the queue,
        # as RabbitMQ sends them: py-amqp/kombu raise ConsumerCancelled inside queue_delete otherwise
        session = self.session
        session.held_cancels = held = []
        try:
            n = self.vhost.delete_queue(q)
        finally:
            session.held_cancels = None
        session.exclusive_queues.discard(q)
        if not m.nowait:
            self._reply(spec.QueueDeleteOk(n))
        for ch, tag in held:
            ch.notify_cancel(tag)

    # --- basic class: consumers --------------------------------------------------------------

    def handle_basic_qos(self, m) -> None:
        if m.global_:
            self.prefetch_count, self.prefetch_size = m.prefetch_count, m.prefetch_size
        else:
            self.consumer_prefetch_count, self.consumer_prefetch_size = m.prefetch_count, m.prefetch_size
        self._reply(spec.BasicQosOk())
        self.resume_delivery()

    def handle_basic_consume(self, m) -> None:
        if m.queue == reply_to.REPLY_TO:
            return reply_to.consume(self, m)
        authz.queue_read(self, m)
        q = self._queue(m.queue)
        tag = m.consumer_tag or "amq.ctag-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if tag in self.consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'", m.CLASS_ID, m.METHOD_ID)
        getattr(self.session.broker, "limits", NO_LIMITS).check_consumer(self, m)  # consumer_max_per_channel
        priority = m.arguments.get("x-priority") if m.arguments else None
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise PreconditionFailed(f"invalid arg 'x-priority' for queue '{q.name}' in vhost '{self.vhost.name}': "
                                     f"\"expected integer, got {_type_name(priority)}\"", m.CLASS_ID, m.METHOD_ID)
        if q.has_exclusive_consumer() or (m.exclusive and q.consumers):
            raise AccessRefused(f"queue '{q.name}' in vhost '{self.vhost.name}' in exclusive use")
        c = Consumer(tag, self, q, m.no_ack, m.exclusive, m.arguments,
                     self.consumer_prefetch_count, self.consumer_prefetch_size)
        self.consumers[tag] = c
        q.add_consumer(c)
        if not m.nowait:
            self._reply(spec.BasicConsumeOk(tag))
        q.dispatch()

    def handle_basic_cancel(self, m) -> None:
        if self.reply_consumer is not None and m.consumer_tag == self.reply_consumer.tag:
            return reply_to.cancel(self, m)
        c = self.consumers.pop(m.consumer_tag, None)
        if not m.nowait:
            self._reply(spec.BasicCancelOk(m.consumer_tag))
        if c is not None:
            c.queue.remove_consumer(c)

    def consumer_cancelled_by_broker(self, c: Consumer) -> None:
        """The queue went away under a consumer: tell the client if it asked to be told."""
        if self.consumers.pop(c.tag, None) is None or self.closed:
            return
        held = self.session.held_cancels
        if held is not None:  # this connection is deleting the queue: after its delete-ok
            held.append((self, c.tag))
        else:
            self.notify_cancel(c.tag)

    def notify_cancel(self, tag: str) -> None:
        if (self.session.capabilities.get("consumer_cancel_notify") and not self.closed
                and self.conn.channel_is_open(self.number)):
            self._reply(spec.BasicCancel(tag, True))

    # --- basic class: publish ----------------------------------------------------------------

    def handle_content(self, m, properties: bytes, body) -> None:
        """basic.publish with its content: route, enqueue, return, confirm."""
        if m.immediate:
            raise NotImplemented_("immediate=true", m.CLASS_ID, m.METHOD_ID)
        ex = self.vhost.exchanges.get(m.exchange)
        if ex is not self.publish_allowed and self.publish_checked.get(m.exchange, authz.UNCHECKED) is not ex:
            authz.publish(self, m)  # write permission (and topic permission), then cached
        if ex is None:
            raise NotFound(f"no exchange '{m.exchange}' in vhost '{self.vhost.name}'", m.CLASS_ID, m.METHOD_ID)
        if ex.internal:
            raise AccessRefused(f"cannot publish to internal exchange '{m.exchange}' in vhost "
                                f"'{self.vhost.name}'", m.CLASS_ID, m.METHOD_ID)
        self.stats_publish += 1
        ex.stats_publish_in += 1
        msg = Message(m.exchange, m.routing_key, properties, body)
        if len(properties) >= 2 and (properties[0] & _CHECKED_FLAGS_HI or properties[1] & _USER_ID_FLAG):
            self._check_properties(m, msg)
        if self.tx_mode:
            self.tx_publishes.append((ex, msg, m.mandatory))
            return
        need = self._publish(ex, msg, m.mandatory)
        confirms = self.confirms
        if confirms is not None:  # a queue that turned it away (x-overflow reject-publish): basic.nack
            confirms.published(need, need == REFUSED)

    def _check_properties(self, m, msg: Message) -> None:
        """The properties the broker acts on at publish time: reply-to, expiration, user-id."""
        properties = msg.properties
        if properties[0] & _REPLY_TO_FLAG_HI:
            reply_to.rewrite(self, msg)
        if properties[0] & _EXPIRATION_FLAG_HI:
            msg.check_expiration()
        if properties[1] & _USER_ID_FLAG:
            user_id = msg.decoded.user_id
            if user_id is not None and user_id != self.session.username and not authz.may_impersonate(self):
                raise PreconditionFailed(f"user_id property set to '{user_id}' but authenticated user was "
                                         f"'{self.session.username}'", m.CLASS_ID, m.METHOD_ID)

    def _publish(self, ex, msg: Message, mandatory: bool) -> int:
        """Route and enqueue; returns the sync number the message's durability waits for (or 0),
        or REFUSED when a queue turned it away (``Queue.publish``, x-overflow reject-publish)."""
        queues = ex.route(msg, (msg.routing_key,))
        if not queues:
            if mandatory:
                self.stats_unroutable_returned += 1
                self.conn.send_content(self.number, spec.BasicReturn(312, "NO_ROUTE", msg.exchange, msg.routing_key),
                                       msg.properties, msg.body)
                self.session.want_flush()
            else:
                self.stats_unroutable_dropped += 1
            return 0
        need = 0
        refused = False
        for q in queues:
            n = q.publish(msg)
            if n > need:
                need = n
            elif n == REFUSED:
                refused = True
            if q.congested:  # flow control: its backlog is over the mark (queue.py)
                self.session.throttled_by(q)
        if msg.persistent:
            msg.routed()
        return REFUSED if refused else need  # REFUSED by any queue: the publisher gets a nack

    def synced(self, number: int) -> None:
        """A sync completed (called by Durability): a tx.commit-ok that waited for it goes out."""
        if self.closed:
            return
        if self.commit_waits_for and number >= self.commit_waits_for:
            self.commit_waits_for = 0
            self._reply(spec.TxCommitOk())
        if self.commit_waits_for:
            self.session.durability.waiting.add(self)

    def _confirms_ready(self, confirms: Confirms) -> None:
        self.session.want_confirm_flush(self)

    def flush_confirms(self) -> None:
        """Tell the client what its confirms allow now: one basic.ack (multiple when it covers
        more than one publish), a basic.nack for each refused publish (``Confirms.settle``)."""
        confirms = self.confirms
        if confirms is None or self.closed or not self.conn.channel_is_open(self.number):
            return
        send, number = self.conn.send_method, self.number
        for n, multiple, ack in confirms.settle():
            send(number, spec.BasicAck(n, multiple) if ack else spec.BasicNack(n, False, False))

    # --- basic class: get, ack, reject, recover ------------------------------------------------

    def handle_basic_get(self, m) -> None:
        authz.queue_read(self, m)
        q = self._queue(m.queue)
        entry = q.take(m.no_ack)  # marks it delivered
        if entry is None:
            self._reply(spec.BasicGetEmpty())
            return
        seq, msg, redelivered, _ = entry
        q.stats_get += 1
        if redelivered:
            q.stats_redeliver += 1
        tag = self.next_tag
        self.next_tag = tag + 1
        if not m.no_ack:
            self.unacked[tag] = (q, seq, msg, None, tag)
        self.conn.send_content(self.number, spec.BasicGetOk(tag, redelivered, msg.exchange, msg.routing_key,
                                                            q.message_count), msg.properties, msg.body)
        self.session.want_flush()

    def _take_unacked(self, tag: int, multiple: bool, m) -> list[tuple]:
        unacked = self.unacked
        if multiple:
            if tag == 0:
                tags = list(unacked)
            else:
                if tag not in unacked and (not unacked or tag >= self.next_tag):
                    raise PreconditionFailed(f"unknown delivery tag {tag}", m.CLASS_ID, m.METHOD_ID)
                tags = []
                for t in unacked:  # insertion order is tag order
                    if t > tag:
                        break
                    tags.append(t)
            return [unacked.pop(t) for t in tags]
        entry = unacked.pop(tag, None)
        if entry is None:
            raise PreconditionFailed(f"unknown delivery tag {tag}", m.CLASS_ID, m.METHOD_ID)
        return [entry]

    def _settle(self, entries: list[tuple], requeue: bool | None) -> None:
        """requeue: True puts the messages back, False rejects them, None (ack) forgets them."""
        if requeue is None:
            self.stats_ack += len(entries)
        touched = set()
        requeued = defaultdict(list)
        for q, seq, msg, consumer, _tag in entries:
            if consumer is not None:
                size = len(msg.body)
                consumer.unacked -= 1
                consumer.unacked_bytes -= size
                self.consumer_unacked -= 1
                self.consumer_unacked_bytes -= size
                touched.add(consumer.queue)
            if requeue:
                requeued[q].append((seq, msg))
            elif requeue is None:  # acked
                q.stats_ack += 1
                q.forget(seq, msg)
            else:  # rejected or nacked without requeue: dead-lettered if the queue says so
                q.reject(seq, msg)
        for q, items in requeued.items():
            q.requeue(items)
            touched.discard(q)
        for q in touched:
            q.dispatch()

    def _ack_like(self, m, multiple: bool, requeue: bool | None) -> None:
        entries = self._take_unacked(m.delivery_tag, multiple, m)
        if self.tx_mode:
            self.tx_settles.append((entries, requeue))
            return
        self._settle(entries, requeue)

    def handle_basic_ack(self, m) -> None:
        self._ack_like(m, m.multiple, None)

    def handle_basic_nack(self, m) -> None:
        self._ack_like(m, m.multiple, m.requeue)

    def handle_basic_reject(self, m) -> None:
        self._ack_like(m, False, m.requeue)

    def _recover(self) -> None:
        entries = list(self.unacked.values())
        self.unacked.clear()
        self._settle(entries, True)

    def handle_basic_recover(self, m) -> None:
        self._recover()  # requeue=false (redeliver to the same consumer) is served as requeue
        self._reply(spec.BasicRecoverOk())

    def handle_basic_recover_async(self, m) -> None:
        self._recover()

    # --- confirm and tx ----------------------------------------------------------------------

    def handle_confirm_select(self, m) -> None:
        if self.tx_mode:
            raise PreconditionFailed("cannot switch from tx to confirm mode", m.CLASS_ID, m.METHOD_ID)
        if self.confirms is None:
            self.confirms = Confirms(self.session.durability, self._confirms_ready)
        if not m.nowait:
            self._reply(spec.ConfirmSelectOk())

    def handle_tx_select(self, m) -> None:
        if self.confirm_mode:
            raise PreconditionFailed("cannot switch from confirm to tx mode", m.CLASS_ID, m.METHOD_ID)
        self.tx_mode = True
        self._reply(spec.TxSelectOk())

    def handle_tx_commit(self, m) -> None:
        if not self.tx_mode:
            raise PreconditionFailed("channel is not transactional", m.CLASS_ID, m.METHOD_ID)
        publishes, settles = self.tx_publishes, self.tx_settles
        self.tx_publishes, self.tx_settles = [], []
        need = 0
        for ex, msg, mandatory in publishes:
            need = max(need, self._publish(ex, msg, mandatory))
        for entries, requeue in settles:
            self._settle(entries, requeue)
        if need and need > self.session.durability.synced:
            self.commit_waits_for = need  # commit-ok once the messages are on disk
            self.session.durability.waiting.add(self)
            return
        self._reply(spec.TxCommitOk())

    def handle_tx_rollback(self, m) -> None:
        if not self.tx_mode:
            raise PreconditionFailed("channel is not transactional", m.CLASS_ID, m.METHOD_ID)
        self.tx_publishes = []
        # acks inside the rolled-back transaction are undone: the messages stay unacked
        self._restore_tx_settles()
        self._reply(spec.TxRollbackOk())

    def _restore_tx_settles(self) -> None:
        for entries, _ in self.tx_settles:
            for entry in entries:
                self.unacked[entry[4]] = entry
        self.unacked = dict(sorted(self.unacked.items()))
        self.tx_settles = []

    # --- end of life -------------------------------------------------------------------------

    def close(self) -> None:
        """The channel is gone (closed by either side, or its connection is): release everything."""
        if self.closed:
            return
        self.closed = True
        TOTALS.channel_closed(self)  # its counts outlive it (warren/metrics/totals.py)
        reply_to.release(self)
        for c in list(self.consumers.values()):
            c.queue.remove_consumer(c)
        self.consumers.clear()
        self._restore_tx_settles()  # uncommitted acks never happened
        entries = list(self.unacked.values())
        self.unacked.clear()
        self.tx_publishes = []
        if entries:
            self._settle(entries, True)


def _type_name(value) -> str:
    """RabbitMQ's name for a field value's type, for its "expected integer" refusals."""
    for kind, name in ((bool, "bool"), (str, "longstr"), (bytes, "binary"), (float, "double"),
                       (dict, "table"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "void" if value is None else type(value).__name__


# Qpid's exchange.bound-ok reply codes (INVENTORY.md §7.1.1, the Qpid Java broker's ExchangeBoundHandler)
BOUND_OK, BOUND_NO_EXCHANGE, BOUND_NO_QUEUE, BOUND_NO_BINDINGS = 0, 1, 2, 3
BOUND_QUEUE_NOT_BOUND, BOUND_NO_QUEUE_WITH_KEY, BOUND_QUEUE_NOT_BOUND_WITH_KEY = 4, 5, 6


def handle_exchange_bound(ch: Channel, m) -> None:
    """Qpid 0-8/0-9/0-91 exchange.bound: is anything (this queue, this key) bound to the exchange?

    ``m`` is the native method of the client's table (no 0-9-1 twin exists); the answer is the
    bound-ok of that same table.
    """
    reply_cls = sys.modules[type(m).__module__].ExchangeBoundOk
    ex = ch.vhost.exchanges.get(m.exchange)
    queue = ch.vhost.queues.get(m.queue) if m.queue else None
    if ex is None:
        code, text = BOUND_NO_EXCHANGE, f"Exchange '{m.exchange}' not found"
    elif m.queue and queue is None:
        code, text = BOUND_NO_QUEUE, f"Queue '{m.queue}' not found"
    else:
        bindings = list(ex.bindings.values())
        if queue is not None:
            bindings = [b for b in bindings if b.destination is queue]
        if m.routing_key:
            bindings = [b for b in bindings if b.routing_key == m.routing_key]
        if bindings:
            code, text = BOUND_OK, ""
        elif not m.queue and not m.routing_key:
            code, text = BOUND_NO_BINDINGS, "no bindings"
        elif not m.routing_key:
            code, text = BOUND_QUEUE_NOT_BOUND, f"Queue '{m.queue}' not bound to exchange '{m.exchange}'"
        elif not m.queue:
            code, text = BOUND_NO_QUEUE_WITH_KEY, f"No queue bound with routing key '{m.routing_key}'"
        else:
            code, text = (BOUND_QUEUE_NOT_BOUND_WITH_KEY,
                          f"Queue '{m.queue}' not bound with routing key '{m.routing_key}' to exchange '{m.exchange}'")
    ch._reply(reply_cls(code, text))


def _build_handlers() -> dict:
    table = {EXCHANGE_BOUND: handle_exchange_bound}
    for index, cls in spec.METHODS.items():
        name = "handle_" + cls.NAME.replace(".", "_").replace("-", "_")
        fn = getattr(Channel, name, None)
        if fn is not None:
            table[index] = fn
    return table


HANDLERS = _build_handlers()
