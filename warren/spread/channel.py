"""The 0-9-1 channel of a worker whose vhosts are spread (``--worker-mode queues``).

What changes from ``warren/protocol/amqp0_9_1/channel.py``: a change of definitions (exchange
and queue declare, delete, bind, unbind) is ordered by worker 0 and applied by every worker
before it is answered (``coordinator.py``), and a purge of another worker's queue is asked of
its owner. While such an answer is awaited the connection reads nothing more
(``AMQPConnection.hold_input``): the answer goes out before anything the client sent after
the method, as in one process. The checks of permission run here first, on the worker that
knows the user; the refusals of the entity rules come from worker 0 or the owner, as the same
errors.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os

from warren.broker import authz, reply_to
from warren.broker.message import Message
from warren.errors import AMQPError, InternalError, NotAllowed
from warren.protocol.amqp0_9_1.channel import HANDLERS, Channel
from warren.protocol.amqp0_9_1.names import NAMED_METHODS, check_names
from warren.spec import amqp0_9_1 as spec
from warren.spread.links import PeerGone
from warren.spread.proxy import RemoteConsumer, RemoteSettling, handlers_of
from warren.spread.remote_queue import RemoteQueue
from warren.spread.shared_prefetch import Lender

__all__ = ["SpreadChannel"]

log = logging.getLogger("warren.spread")

MOVED = object()  # _placed_queue: the connection moved to the queue's owner


class SpreadChannel(Lender, RemoteSettling, Channel):
    # consumers of queues other workers own: tag -> RemoteConsumer (made on first use; the
    # settlers of their deliveries: RemoteSettling)
    remote_consumers: dict | None = None

    def __init__(self, session, number: int, sink) -> None:
        super().__init__(session, number, sink)
        if session.io.placing:  # the first publish may move the connection (placement.py)
            self.publish = self._placing_publish
            self.publish_run = self._placing_publish_run

    def handle_method(self, method) -> None:
        handler = SPREAD_HANDLERS.get(method.INDEX)
        if handler is None:
            return super().handle_method(method)
        if method.INDEX in NAMED_METHODS:
            check_names(method)  # names that are not UTF-8: 501 as RabbitMQ (as Channel.handle_method)
        if self.session.replaying and method.INDEX in REPLAY_SKIPPED:
            # moved here from another worker: this was answered there, and what it declared or
            # bound is in force on every worker already (placement.py)
            if method.INDEX == spec.QueueDeclare.INDEX:
                self.last_queue = method.queue
            return
        handler(self, method)

    # --- placement: the first publish or consume may move the connection (placement.py) -----

    def _place(self, owner: int | None) -> bool:
        """Move to ``owner`` (None: stay); True when the connection has gone there."""
        io = self.session.io
        if owner is None or owner == self.session.broker.directory.index:
            io.settle()
            return False
        if io.move_to(owner):
            return True
        return False

    def _publish_owner(self, exchange: str, routing_key: str) -> int | None:
        """The one worker owning every queue a publish here would reach, if it depends on the
        routing key alone; None otherwise."""
        ex = self.vhost.exchanges.get(exchange)
        dests = ex.run_destinations(routing_key) if ex is not None else None
        if not dests:
            return None
        owners = {q.owner if isinstance(q, RemoteQueue) else -1 for q in dests}
        return owners.pop() if len(owners) == 1 and -1 not in owners else None

    def _placing_publish(self, exchange: str, routing_key: str, properties: bytes, body, mandatory: bool):
        del self.publish, self.publish_run  # the class's from now on: placed after this one
        if self.session.io.placing and self._place(self._publish_owner(exchange, routing_key)):
            return None  # moved: the owner handles this publish
        return self.publish(exchange, routing_key, properties, body, mandatory)

    def _placing_publish_run(self, exchange: str, routing_key: str, properties: list, bodies: list,
                             mandatory: bool) -> int:
        del self.publish, self.publish_run
        if self.session.io.placing and self._place(self._publish_owner(exchange, routing_key)):
            return len(bodies)  # moved: the owner handles the run
        return self.publish_run(exchange, routing_key, properties, bodies, mandatory)

    def _after(self, method, awaitable, answer) -> None:
        """Answer ``method`` with ``answer(result)`` once ``awaitable`` is done; nothing more is
        read from the client meanwhile. A refusal closes the channel (or connection) as the same
        refusal in one process would."""
        io = self.session.io
        io.hold_input()
        task = asyncio.ensure_future(awaitable)

        def done(t) -> None:
            io.release_input()
            if self.closed or t.cancelled():
                return
            e = t.exception()
            if e is not None:
                if isinstance(e, PeerGone):
                    e = InternalError(f"another worker did not answer: {e}")
                elif not isinstance(e, AMQPError):
                    log.error("%s on channel %d failed", method.NAME, self.number, exc_info=e)
                    e = InternalError("internal error")
                e.class_id, e.method_id = method.CLASS_ID, method.METHOD_ID
                self.session.fail(e, self.number)
                return
            reply = answer(t.result())
            if reply is not None and not getattr(method, "nowait", False):
                self._reply(reply)
            self.session.want_flush()
        task.add_done_callback(done)

    def _define(self, m, op: str, args: tuple, reply) -> None:
        self._after(m, self.session.broker.directory.define(self.vhost.name, op, args), lambda _: reply)

    # --- exchanges -----------------------------------------------------------------------

    def handle_exchange_declare(self, m) -> None:
        if m.passive or m.exchange == "":
            return Channel.handle_exchange_declare(self, m)  # local: every worker holds every exchange
        authz.exchange_declare(self, m.exchange, m.type, m.passive, m.arguments)
        self._define(m, "declare_exchange", (m.exchange, m.type, False, m.durable, m.auto_delete, m.internal,
                                             m.arguments), spec.ExchangeDeclareOk())

    def handle_exchange_delete(self, m) -> None:
        authz.exchange_delete(self, m.exchange)
        self._define(m, "delete_exchange", (m.exchange, m.if_unused), spec.ExchangeDeleteOk())

    def handle_exchange_bind(self, m) -> None:
        authz.exchange_bind(self, m.destination, m.source, m.routing_key)
        self._define(m, "bind_exchange", (m.destination, m.source, m.routing_key, m.arguments), spec.ExchangeBindOk())

    def handle_exchange_unbind(self, m) -> None:
        authz.exchange_bind(self, m.destination, m.source, m.routing_key)
        self._define(m, "unbind_exchange", (m.destination, m.source, m.routing_key, m.arguments),
                     spec.ExchangeUnbindOk())

    # --- queues --------------------------------------------------------------------------

    def handle_queue_declare(self, m) -> None:
        name = m.queue
        if m.passive or name.startswith(reply_to.REPLY_TO):
            q = self.vhost.remote_queues.get(name)
            if q is None or not m.passive:
                return Channel.handle_queue_declare(self, m)
            authz.queue_declare(self, name, True, m.arguments)
            if q.exclusive_owner is not None:  # another connection's (ours would be local)
                raise self.vhost.locked_error(name)
            self.last_queue = name
            self._after(m, self.session.broker.directory.queue_counts(q),
                        lambda counts: spec.QueueDeclareOk(name, *counts))
            return
        authz.queue_declare(self, name, False, m.arguments)
        spread = self.session.broker.directory
        ref = spread.session_ref(self.session)
        if not name:
            self.session.unmovable = True  # its name is not in the client's octets: no move

        def declared(result):
            qname, messages, consumers = result
            self.last_queue = qname
            q = self.vhost.queues.get(qname)
            if q is not None:
                q.touch()  # x-expires: a declare is a use
            return spec.QueueDeclareOk(qname, messages, consumers)
        self._after(m, spread.define(self.vhost.name, "declare_queue",
                                     (name, m.durable, m.exclusive, m.auto_delete, m.arguments, ref)), declared)

    def handle_queue_bind(self, m) -> None:
        name = m.queue or self.last_queue
        authz.queue_bind(self, name, m.exchange, m.routing_key)
        ref = self.session.broker.directory.session_ref(self.session)
        self._define(m, "bind_queue", (name, m.exchange, m.routing_key, m.arguments, ref), spec.QueueBindOk())

    def handle_queue_unbind(self, m) -> None:
        name = m.queue or self.last_queue
        authz.queue_bind(self, name, m.exchange, m.routing_key)
        ref = self.session.broker.directory.session_ref(self.session)
        self._define(m, "unbind_queue", (name, m.exchange, m.routing_key, m.arguments, ref), spec.QueueUnbindOk())

    def handle_queue_purge(self, m) -> None:
        name = m.queue or self.last_queue
        q = self.vhost.remote_queues.get(name)
        if q is None:
            return Channel.handle_queue_purge(self, m)
        authz.queue_read(self, name)
        if q.exclusive_owner is not None:
            raise self.vhost.locked_error(name)
        self._after(m, self.session.broker.directory.purge(q), lambda n: spec.QueuePurgeOk(n))

    def handle_queue_delete(self, m) -> None:
        name = m.queue or self.last_queue
        authz.queue_delete(self, name)
        spread = self.session.broker.directory
        ref = spread.session_ref(self.session)
        session = self.session
        # our consumers of it hear basic.cancel after delete-ok, as in one process (channel.py)
        session.held_cancels = held = []

        async def delete():
            try:
                return await spread.define(self.vhost.name, "delete_queue", (name, m.if_unused, m.if_empty, ref))
            finally:
                session.held_cancels = None

        def deleted(n):
            if not m.nowait:
                self._reply(spec.QueueDeleteOk(n))
            for ch, tag in held:
                ch.notify_cancel(tag)
        self._after(m, delete(), deleted)


    # --- consumers of another worker's queue (proxy.py) ------------------------------------

    def _remote_queue(self, name: str):
        q = self.vhost.remote_queues.get(name)
        if q is not None and q.exclusive_owner is not None:
            raise self.vhost.locked_error(name)  # exclusive queues live with their connection
        return q

    def _prefetch(self) -> tuple:
        return (self.consumer_prefetch_count, self.consumer_prefetch_size, self.prefetch_count, self.prefetch_size)

    def _placed_queue(self, m):
        """For basic.consume and basic.get, after the permission check: the record of the queue
        if another worker owns it, None if we do, or MOVED when the connection went to the owner
        instead (placement.py), which then handles this method."""
        name = m.queue or self.last_queue
        authz.queue_read(self, name)
        q = self._remote_queue(name)
        if self.session.io.placing and self._place(q.owner if q is not None else None):
            return MOVED
        return q

    def handle_basic_consume(self, m) -> None:
        q = self._placed_queue(m)
        if q is MOVED:
            return
        if q is None:
            return Channel.handle_basic_consume(self, m)
        name = q.name
        tag = m.consumer_tag or "amq.ctag-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if self.remote_consumers is None:
            self.remote_consumers = {}
        if tag in self.consumers or tag in self.remote_consumers:
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        spread = self.session.broker.directory
        ref = spread.session_ref(self.session)
        rc = self.remote_consumers[tag] = RemoteConsumer(tag, q.owner, m.no_ack, name, self._settler(q.owner))

        def consumed(_):
            if not m.nowait:
                self._reply(spec.BasicConsumeOk(tag))
            pending, rc.pending = rc.pending, None
            for item in pending:
                self.remote_deliver(q.owner, item, False)
        self._after(m, spread.ask(q.owner, "consume", self.vhost.name, name, ref.session_id, self.number,
                                            tag, m.no_ack, m.exclusive, m.arguments, *self._prefetch()), consumed)

    def remote_deliver(self, owner: int, item: tuple, arrived: bool = True) -> None:
        """A delivery from the owner of a queue one of our consumers reads (Spread); ``arrived``
        False: one held here before (pending), counted when it came."""
        _, _, consumer_tag, owner_tag, redelivered, exchange, routing_key, properties, body = item
        if arrived and owner_tag is not None:  # a consumer that acks: the channel's prefetch counts it
            self.count_arrival(owner, len(body))
        rc = self.remote_consumers.get(consumer_tag) if self.remote_consumers is not None else None
        if rc is None:  # cancelled meanwhile: back to the queue
            if owner_tag is not None:
                self._settler(owner).settle_entries([owner_tag], True)
                self.uncount(len(body))
            return
        if rc.pending is not None or not self.sink.flow_active:  # before consume-ok, or channel.flow off
            if rc.pending is None:
                rc.pending = []
            rc.pending.append(item)
            return
        msg = Message(exchange, routing_key, properties, body)
        tag = self.next_tag
        self.next_tag = tag + 1
        if not rc.no_ack:
            self.unacked[tag] = (rc.queue, owner_tag, msg, rc, tag)
            rc.unacked += 1
            rc.unacked_bytes += len(body)
        self.sink.deliver(rc, tag, redelivered, msg)

    def remote_cancelled(self, consumer_tag: str) -> None:
        """The owner's queue went away under one of our consumers."""
        if self.remote_consumers is not None and self.remote_consumers.pop(consumer_tag, None) is not None:
            self.notify_cancel(consumer_tag)

    def handle_basic_cancel(self, m) -> None:
        rc = self.remote_consumers.pop(m.consumer_tag, None) if self.remote_consumers is not None else None
        if rc is None:
            return Channel.handle_basic_cancel(self, m)
        if rc.pending and not rc.no_ack:  # held while channel.flow was off: back to the queue
            self._settler(rc.owner).settle_entries([item[3] for item in rc.pending], True)
            for item in rc.pending:
                self.uncount(len(item[8]))
        self.session.broker.directory.tell(rc.owner, "cancel", id(self.session), self.number, m.consumer_tag)
        if not m.nowait:
            self._reply(spec.BasicCancelOk(m.consumer_tag))

    def handle_basic_get(self, m) -> None:
        q = self._placed_queue(m)
        if q is MOVED:
            return
        if q is None:
            return Channel.handle_basic_get(self, m)
        name = q.name
        spread = self.session.broker.directory
        ref = spread.session_ref(self.session)
        settler = self._settler(q.owner)  # also what makes our close tell the owner to drop its channel

        def got(result):
            if result is None:
                return spec.BasicGetEmpty()
            owner_tag, redelivered, exchange, routing_key, properties, body, left = result
            msg = Message(exchange, routing_key, properties, body)
            tag = self.next_tag
            self.next_tag = tag + 1
            if not m.no_ack:
                self.unacked[tag] = (settler, owner_tag, msg, None, tag)
            self.conn.send_content(self.number, spec.BasicGetOk(tag, redelivered, exchange, routing_key, left),
                                   msg.properties, msg.body)
            return None
        self._after(m, spread.ask(q.owner, "get", self.vhost.name, name, ref.session_id, self.number,
                                            m.no_ack), got)

    def handle_channel_flow(self, m) -> None:
        """channel.flow: the owners of the queues our consumers read stop (or go on) sending;
        what was on its way meanwhile waits here for the flow to come back."""
        Channel.handle_channel_flow(self, m)
        if self.remote_consumers:
            spread = self.session.broker.directory
            for owner in {rc.owner for rc in self.remote_consumers.values()}:
                spread.tell(owner, "flow", id(self.session), self.number, m.active)
            if m.active:
                for rc in list(self.remote_consumers.values()):
                    held, rc.pending = rc.pending, None
                    for item in held or ():
                        self.remote_deliver(rc.owner, item, False)

    def handle_basic_qos(self, m) -> None:
        Channel.handle_basic_qos(self, m)
        if self.remote_consumers:
            spread = self.session.broker.directory
            for owner in {rc.owner for rc in self.remote_consumers.values()}:
                spread.tell(owner, "qos", id(self.session), self.number, *self._prefetch())
        if self.wanting and self.prefetch_count:
            self.share_room()  # a larger count: the owners that asked get their turn

    def close(self) -> None:
        if self.closed:
            return
        owners = set(self.settlers or ()) | {rc.owner for rc in (self.remote_consumers or {}).values()}
        super().close()  # requeues what is unacked, the remote deliveries through their settlers
        self._tell_owners_closed(owners)


SPREAD_HANDLERS = handlers_of(SpreadChannel, spec.METHODS, HANDLERS)
# what a replay of a moved connection skips (placement.py): changes already in force everywhere
REPLAY_SKIPPED = frozenset(m.INDEX for m in (
    spec.ExchangeDeclare, spec.ExchangeDelete, spec.ExchangeBind, spec.ExchangeUnbind, spec.QueueDeclare,
    spec.QueueBind, spec.QueueUnbind, spec.QueuePurge, spec.QueueDelete))
