"""The 0-9-1 channel: every channel-level method, answered over the broker's operations.

``handle_<class>_<method>(m)`` handles one method; ``HANDLERS`` maps method ids to them, built
from the names below. Each turns the method's fields into one protocol-neutral operation of
``BrokerChannel`` (``warren/broker/channel.py``) and writes the 0-9-1 answer; the operations
raise ``warren.errors`` exceptions to refuse, which the connection handler turns into
channel.close (soft) or connection.close (hard) with this method's class and method ids. The
0-8 family (0-8, 0-9, Qpid's 0-91) reaches these handlers through its dialect translation
(``warren/protocol/dialects.py``); Qpid's exchange.bound, which has no 0-9-1 twin, is answered
here from the client's own table.

basic.publish does not come through here: the connection handler calls
``BrokerChannel.publish`` for each content directly (the hot path). The channel's
``DeliverySink`` is ``delivery.py``; publisher confirms are written by ``flush_confirms``,
once per write batch.
"""

from __future__ import annotations

import logging
import sys

from warren.broker import authz
from warren.broker.channel import BrokerChannel
from warren.broker.later import is_later
from warren.errors import AMQPError, InternalError, NotImplemented_
from warren.protocol.amqp0_9_1.names import NAMED_METHODS, check_names
from warren.protocol.dialects import EXCHANGE_BOUND
from warren.spec import amqp0_9_1 as spec

__all__ = ["Channel", "HANDLERS"]

log = logging.getLogger("warren.protocol")


class Channel(BrokerChannel):
    def __init__(self, session, number: int, sink) -> None:
        super().__init__(session, number, sink)
        self.conn = session.conn  # the sans-IO ServerConnection
        if session.io.placing:  # the first publish may move the connection (warren/server/placement.py)
            self.publish = self._placing_publish
            self.publish_run = self._placing_publish_run

    # --- dispatch ------------------------------------------------------------------------

    def handle_method(self, method) -> None:
        handler = HANDLERS.get(method.INDEX)
        if handler is None:
            raise NotImplemented_(f"{method.NAME} is not supported", method.CLASS_ID, method.METHOD_ID)
        if method.INDEX in NAMED_METHODS:
            check_names(method)  # names that are not UTF-8: 501 as RabbitMQ (names.py)
        if self.session.replaying and method.INDEX in REPLAY_SKIPPED:
            # moved here from another worker: this was answered there, and what it declared or
            # bound is in force on every worker already (placement.py)
            if method.INDEX == spec.QueueDeclare.INDEX:
                self.last_queue = method.queue
            return
        handler(self, method)

    def _reply(self, method) -> None:
        self.conn.send_method(self.number, method)
        self.session.want_flush()

    def _when(self, method, result, answer) -> None:
        """``answer(result)`` now or, when the broker answers later (warren/broker/later.py:
        another process applies the change or holds the queue), once it is known; nothing more
        is read from the client meanwhile (``io.when_done``), so the answer goes out before
        anything the client sent after ``method``. A refusal closes the channel (or
        connection) as the same refusal answered at once would."""
        if not is_later(result):
            answer(result)
            return

        def done(value, error) -> None:
            if self.closed:
                return
            if error is None:
                try:
                    answer(value)
                except Exception as e:  # (refusals are raised before any answer is written)
                    error = e
            if error is not None:
                if not isinstance(error, AMQPError):
                    log.error("%s on channel %d of %s failed", method.NAME, self.number, self.session,
                              exc_info=error)
                    error = InternalError("internal error")
                error.class_id, error.method_id = method.CLASS_ID, method.METHOD_ID
                self.session.fail(error, self.number)
                return
            self.session.want_flush()
        self.session.io.when_done(result, done)

    def _reply_unless_nowait(self, method, reply):
        """An ``answer`` for ``_when``: ``reply`` unless the client asked for no answer."""
        if getattr(method, "nowait", False):
            return lambda _result: None
        return lambda _result: self._reply(reply)

    # --- placement: a connection that may still move (--worker-mode queues) ---------------

    def _moves(self, queue: str) -> bool:
        """Before its first consume or get: True when the connection moved to the process
        holding the queue, which handles this method (warren/server/placement.py)."""
        name = queue or self.last_queue
        authz.queue_read(self, name)
        return self.directory.moves_for_queue(self.session, self.vhost, name)

    def _placing_publish(self, exchange: str, routing_key: str, properties: bytes, body, mandatory: bool):
        del self.publish, self.publish_run  # the class's from now on: placed after this one
        if self.session.io.placing and self.directory.moves_for_publish(self.session, self.vhost, exchange,
                                                                        routing_key):
            return None  # moved: the owner handles this publish
        return self.publish(exchange, routing_key, properties, body, mandatory)

    def _placing_publish_run(self, exchange: str, routing_key: str, properties: list, bodies: list,
                             mandatory: bool) -> int:
        del self.publish, self.publish_run
        if self.session.io.placing and self.directory.moves_for_publish(self.session, self.vhost, exchange,
                                                                        routing_key):
            return len(bodies)  # moved: the owner handles the run
        return self.publish_run(exchange, routing_key, properties, bodies, mandatory)

    # --- answers that wait (hooks of BrokerChannel) ----------------------------------------

    def _confirms_ready(self, confirms) -> None:
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

    def tx_committed(self) -> None:
        self._reply(spec.TxCommitOk())

    # --- channel class ---------------------------------------------------------------------

    def handle_channel_flow(self, m) -> None:
        self._reply(spec.ChannelFlowOk(m.active))
        self.set_flow(m.active)

    def handle_channel_flow_ok(self, m) -> None:
        pass  # we never send channel.flow; a stray flow-ok is harmless

    def handle_access_request(self, m) -> None:
        # 0-8/0-9 clients ask for a ticket; RabbitMQ grants ticket 1 and ignores it afterwards
        self._reply(spec.AccessRequestOk(1))

    # --- exchange class --------------------------------------------------------------------

    def handle_exchange_declare(self, m) -> None:
        self._when(m, self.declare_exchange(m.exchange, m.type, m.passive, m.durable, m.auto_delete, m.internal,
                                            m.arguments), self._reply_unless_nowait(m, spec.ExchangeDeclareOk()))

    def handle_exchange_delete(self, m) -> None:
        self._when(m, self.delete_exchange(m.exchange, m.if_unused),
                   self._reply_unless_nowait(m, spec.ExchangeDeleteOk()))

    def handle_exchange_bind(self, m) -> None:
        self._when(m, self.bind_exchange(m.destination, m.source, m.routing_key, m.arguments),
                   self._reply_unless_nowait(m, spec.ExchangeBindOk()))

    def handle_exchange_unbind(self, m) -> None:
        self._when(m, self.unbind_exchange(m.destination, m.source, m.routing_key, m.arguments),
                   self._reply_unless_nowait(m, spec.ExchangeUnbindOk()))

    # --- queue class -----------------------------------------------------------------------

    def handle_queue_declare(self, m) -> None:
        def declared(result) -> None:
            if not m.nowait:
                self._reply(spec.QueueDeclareOk(*result))
        self._when(m, self.declare_queue(m.queue, m.passive, m.durable, m.exclusive, m.auto_delete, m.arguments),
                   declared)

    def handle_queue_bind(self, m) -> None:
        self._when(m, self.bind_queue(m.queue, m.exchange, m.routing_key, m.arguments),
                   self._reply_unless_nowait(m, spec.QueueBindOk()))

    def handle_queue_unbind(self, m) -> None:
        self._when(m, self.unbind_queue(m.queue, m.exchange, m.routing_key, m.arguments),
                   self._reply_unless_nowait(m, spec.QueueUnbindOk()))

    def handle_queue_purge(self, m) -> None:
        def purged(n: int) -> None:
            if not m.nowait:
                self._reply(spec.QueuePurgeOk(n))
        self._when(m, self.purge_queue(m.queue), purged)

    def handle_queue_delete(self, m) -> None:
        def deleted(result) -> None:
            n, held = result
            if not m.nowait:
                self._reply(spec.QueueDeleteOk(n))
            for ch, tag in held:  # basic.cancel of our consumers after delete-ok, as RabbitMQ
                ch.notify_cancel(tag)
        self._when(m, self.delete_queue(m.queue, m.if_unused, m.if_empty), deleted)

    # --- basic class -------------------------------------------------------------------------

    def handle_basic_qos(self, m) -> None:
        self.set_prefetch(m.prefetch_count, m.prefetch_size, m.global_)
        self._reply(spec.BasicQosOk())
        self.resume_delivery()

    def handle_basic_consume(self, m) -> None:
        if self.session.io.placing and self._moves(m.queue):
            return  # the worker it moved to handles this consume

        def consumed(c) -> None:
            if not m.nowait:
                self._reply(spec.BasicConsumeOk(c.tag))
            self.start_consumer(c)
        self._when(m, self.consume(m.queue, m.consumer_tag, m.no_ack, m.exclusive, m.arguments), consumed)

    def handle_basic_cancel(self, m) -> None:
        if not m.nowait:
            self._reply(spec.BasicCancelOk(m.consumer_tag))
        self.cancel(m.consumer_tag)

    def handle_basic_get(self, m) -> None:
        if self.session.io.placing and self._moves(m.queue):
            return  # the worker it moved to handles this get

        def got(result) -> None:
            if result is None:
                self._reply(spec.BasicGetEmpty())
                return
            tag, redelivered, msg, left = result
            self.conn.send_content(self.number, spec.BasicGetOk(tag, redelivered, msg.exchange, msg.routing_key,
                                                                left), msg.properties, msg.body)
            self.session.want_flush()
        self._when(m, self.get(m.queue, m.no_ack), got)

    def handle_basic_ack(self, m) -> None:
        self.ack(m.delivery_tag, m.multiple)

    def handle_basic_nack(self, m) -> None:
        self.reject(m.delivery_tag, m.multiple, m.requeue)

    def handle_basic_reject(self, m) -> None:
        self.reject(m.delivery_tag, False, m.requeue)

    def handle_basic_recover(self, m) -> None:
        self.recover()  # requeue=false (redeliver to the same consumer) is served as requeue
        self._reply(spec.BasicRecoverOk())

    def handle_basic_recover_async(self, m) -> None:
        self.recover()

    # --- confirm and tx ----------------------------------------------------------------------

    def handle_confirm_select(self, m) -> None:
        self.select_confirms()
        self.session.confirms_selected()  # runs of publishes from here on (adapter.py)
        if not m.nowait:
            self._reply(spec.ConfirmSelectOk())

    def handle_tx_select(self, m) -> None:
        self.select_tx()
        self._reply(spec.TxSelectOk())

    def handle_tx_commit(self, m) -> None:
        if self.commit():
            self._reply(spec.TxCommitOk())  # else tx_committed, once the messages are on disk

    def handle_tx_rollback(self, m) -> None:
        self.rollback()
        self._reply(spec.TxRollbackOk())


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
    # --worker-mode queues: another worker's queue is a record here (warren/spread), bound all the same
    queue = (ch.vhost.queues.get(m.queue) or ch.vhost.remote_queues.get(m.queue)) if m.queue else None
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
# what the replay of a connection moved here skips (placement.py): changes already in force everywhere
REPLAY_SKIPPED = frozenset(m.INDEX for m in (
    spec.ExchangeDeclare, spec.ExchangeDelete, spec.ExchangeBind, spec.ExchangeUnbind, spec.QueueDeclare,
    spec.QueueBind, spec.QueueUnbind, spec.QueuePurge, spec.QueueDelete))
