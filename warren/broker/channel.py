"""One channel on the broker side, protocol-neutral: the operations a client may ask for.

Every protocol adapts itself to these operations (0-9-1 and the 0-8 family in
``warren/protocol/amqp0_9_1/channel.py``): declare, delete, bind and unbind exchanges and
queues, purge, publish, consume, cancel, get, settle (ack, reject with or without requeue,
recover), prefetch, publisher confirms and transactions. They take plain arguments, return
results (``PublishOutcome`` for a publish) and raise the errors of ``warren/errors.py``; the
adapter adds the class and method ids of the request and answers in its protocol. Entity rules
(what may be declared, bound, deleted) live in ``vhost.py``, permissions in ``authz.py``; this
file owns what belongs to the channel: consumers, deliveries and their tags, prefetch,
confirms (``confirms.py``) and transactions.

What leaves the broker goes through the channel's ``DeliverySink`` (``delivery.py``):
deliveries, returned messages, cancel notifications. A subclass (the adapter) implements the
replies that wait for something: ``tx_committed`` when a commit's messages are on disk.

Prefetch follows RabbitMQ (INVENTORY.md §10.6): a non-global limit applies to consumers created
afterwards, a global one is shared by the channel's consumers; both apply. The size limit is
honoured as the spec's byte window (RabbitMQ refuses it with 540).
"""

from __future__ import annotations

import base64
import enum
import os
from collections import defaultdict

from warren.broker import authz, reply_to
from warren.broker.confirms import Confirms
from warren.broker.consumer import Consumer
from warren.broker.later import is_later, then
from warren.broker.message import (
    EXPIRATION_HI, HEADERS_HI, PUBLISH_CHECKS_HI, REPLY_TO_HI, USER_ID_LO, Message, clone_messages, may_name_cc,
    untrack as _untrack,
)
from warren.broker.queues.length_limits import REFUSED
from warren.errors import AccessRefused, NotAllowed, NotFound, PreconditionFailed
from warren.broker.totals import TOTALS

__all__ = ["BrokerChannel", "PublishOutcome"]


class PublishOutcome(enum.Enum):
    """What became of one publish (``BrokerChannel.publish``)."""

    ROUTED = "routed"  # enqueued; nothing to wait for (a confirm may go out now)
    PERSISTING = "persisting"  # enqueued; safe once the group commit that covers it completed
    REFUSED = "refused"  # a queue turned it away (x-overflow reject-publish): a negative confirm
    RETURNED = "returned"  # no queue took it and it was mandatory: the sink returned it
    DROPPED = "dropped"  # no queue took it
    HELD = "held"  # inside a transaction: routed at commit


_ROUTED, _PERSISTING, _REFUSED = PublishOutcome.ROUTED, PublishOutcome.PERSISTING, PublishOutcome.REFUSED
_RETURNED, _DROPPED, _HELD = PublishOutcome.RETURNED, PublishOutcome.DROPPED, PublishOutcome.HELD
_UNROUTED = -2  # _route: no queue took it (REFUSED, -1, is a queue's refusal)

# the properties acted on at publish time, tested one octet of the flag word at a time


class BrokerChannel:
    # the HTTP API's message_stats (warren/management/api/stats.py, also read by warren/metrics):
    # plain increments; the deliveries and gets are ``next_tag - 1``
    stats_publish = 0
    stats_ack = 0
    # unroutable publishes (off the routed path; Prometheus' rabbitmq_global_messages_unroutable_*)
    stats_unroutable_dropped = 0
    stats_unroutable_returned = 0
    _room_turn = 0  # share_room: which queue goes first next time
    run_stopped = False  # publish_run: a publish went to a congested queue, the run stops there
    # what ``publish`` makes a message with: an adapter may give its messages more to carry
    # (0-10: the publishing connection, for no-local queues)
    new_message = Message
    # what this channel reads from queues that live in another process: the directory's part
    # (--worker-mode queues: warren/spread/remote_reads.py), made by the first consume or get
    # of such a queue; its ``consumers`` are listed by the HTTP API with the channel's own
    remote = None

    def __init__(self, session, number: int, sink) -> None:
        self.session = session  # the client connection: user, vhost, access, exclusive queues
        self.vhost = session.vhost
        self.directory = session.broker.directory  # where queues live; how definitions change
        self.number = number
        self.sink = sink  # where deliveries go (a DeliverySink, warren/broker/delivery.py)
        self.consumers: dict[str, Consumer] = {}
        # delivery tag -> (queue, seq, message, consumer or None for get, delivery tag)
        self.unacked: dict[int, tuple] = {}
        self.next_tag = 1
        # prefetch: limits for consumers created from now on, and the channel-wide limits
        self.consumer_prefetch_count = 0
        self.consumer_prefetch_size = 0
        self.prefetch_count = 0
        self.prefetch_size = 0
        self.consumer_unacked = 0  # deliveries to consumers (not get) awaiting ack
        self.consumer_unacked_bytes = 0
        self.last_queue = ""  # 0-9-1: an empty queue name means the last one declared here
        self.confirms: Confirms | None = None  # publisher confirms (select_confirms): all their state
        self.commit_waits_for = 0  # a commit's completion held until this sync completes
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

    @property
    def remote_consumers(self) -> dict | None:
        """This channel's consumers of queues in other processes, by tag (None: it has none)."""
        return self.remote.consumers if self.remote is not None else None

    def consumer_count(self) -> int:
        """This channel's consumers, with those of queues in other processes: the HTTP API's and
        Prometheus' figure."""
        remote = self.remote
        return len(self.consumers) + (len(remote.consumers) if remote is not None else 0)

    @property
    def flow_active(self) -> bool:
        """Whether the client lets deliveries flow (0-9-1 channel.flow; the HTTP API's state)."""
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

    # --- delivery (called by Queue.dispatch) ----------------------------------------------

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

    # --- exchanges -----------------------------------------------------------------------------
    # A change of definitions goes through the directory, which applies it where the vhost
    # lives; it may answer later (warren/broker/later.py): the adapter answers either way.

    def declare_exchange(self, name: str, type_: str, passive: bool, durable: bool, auto_delete: bool,
                         internal: bool, arguments: dict):
        authz.exchange_declare(self, name, type_, passive, arguments)
        if passive or not name:  # every process holds every exchange: checked here
            self.vhost.declare_exchange(name, type_, passive, durable, auto_delete, internal, arguments)
            return None
        return then(self.directory.change(self.vhost, "declare_exchange",
                                          (name, type_, False, durable, auto_delete, internal, arguments)), _nothing)

    def delete_exchange(self, name: str, if_unused: bool):
        authz.exchange_delete(self, name)
        return then(self.directory.change(self.vhost, "delete_exchange", (name, if_unused)), _nothing)

    def bind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict):
        authz.exchange_bind(self, destination, source, routing_key)
        return then(self.directory.change(self.vhost, "bind_exchange", (destination, source, routing_key, arguments)),
                    _nothing)

    def unbind_exchange(self, destination: str, source: str, routing_key: str, arguments: dict):
        authz.exchange_bind(self, destination, source, routing_key)
        return then(self.directory.change(self.vhost, "unbind_exchange", (destination, source, routing_key, arguments)),
                    _nothing)

    # --- queues --------------------------------------------------------------------------------

    def _handle(self, name: str):
        """The queue (or the handle of one in another process) this session may use: 404 if
        missing, 405 if another connection's exclusive queue."""
        return self.vhost.queue_handle(name, self.session)

    def _handle_soon(self, name: str):
        """``_handle``, now or later: a queue known nowhere here that the directory may still
        find (a cluster's node reads etcd for a queue another node made a moment ago: the 404's
        ``look_again``, warren/cluster/api.py) is looked for first, and its 404 stands if not found."""
        try:
            return self._handle(name)
        except NotFound as e:
            look_again = getattr(e, "look_again", None)
            if look_again is None:
                raise
            return then(look_again(), lambda _: self._handle(name))

    def declare_queue(self, name: str, passive: bool, durable: bool, exclusive: bool, auto_delete: bool,
                      arguments: dict):
        """(queue name, ready messages, consumers), now or later; an empty name makes a
        server-named queue."""
        if name.startswith(reply_to.REPLY_TO):
            return reply_to.declare(self, name)
        authz.queue_declare(self, name, passive, arguments)
        if passive:
            return then(self._handle_soon(name), self._declared_passively)
        return then(self.directory.change(self.vhost, "declare_queue",
                                          (name, durable, exclusive, auto_delete, arguments, self.session)),
                    self._queue_declared)

    def _declared_passively(self, q):
        q.touch()  # x-expires: a passive declare is a use too
        self.last_queue = q.name
        return then(q.counts(), lambda counts: (q.name, *counts))

    def _queue_declared(self, result: tuple) -> tuple:
        name = result[0]
        self.last_queue = name
        q = self.vhost.queues.get(name)  # (here: not when it lives in another process)
        if q is not None:
            q.touch()  # x-expires: a declare is a use
            if q.exclusive_owner is self.session:
                self.session.exclusive_queues.add(q)
        return result

    def queue_info(self, name: str) -> dict:
        """What a client may read of a queue it could declare passively (RabbitMQ 4's AMQP 1.0
        management node: GET /queues/Q): flags, kind, declared arguments and counts; refused as
        a passive declare is (404 missing, 405 another connection's exclusive queue, 403)."""
        authz.queue_declare(self, name, True, {})
        q = self._handle(name)

        def info(counts: tuple) -> dict:
            return {"name": q.name, "durable": q.durable, "auto_delete": q.auto_delete,
                    "exclusive": q.exclusive_owner is not None, "type": q.queue_type,
                    "arguments": dict(q.arguments), "messages": counts[0], "consumers": counts[1]}
        return then(q.counts(), info)

    def bind_queue(self, queue: str, exchange: str, routing_key: str, arguments: dict):
        authz.queue_bind(self, queue, exchange, routing_key)
        return then(self.directory.change(self.vhost, "bind_queue", (queue or self.last_queue, exchange, routing_key,
                                                                  arguments, self.session)), _nothing)

    def unbind_queue(self, queue: str, exchange: str, routing_key: str, arguments: dict):
        authz.queue_bind(self, queue, exchange, routing_key)
        return then(self.directory.change(self.vhost, "unbind_queue", (queue or self.last_queue, exchange, routing_key,
                                                                  arguments, self.session)), _nothing)

    def purge_queue(self, queue: str):
        """Drop the ready messages; how many, now or later."""
        authz.queue_read(self, queue)
        return then(self._handle_soon(queue or self.last_queue), lambda q: q.purge())

    def delete_queue(self, queue: str, if_unused: bool, if_empty: bool):
        """(messages deleted, held cancel notifications), now or later. The consumers of this
        connection on the queue are told after the answer, as RabbitMQ does (py-amqp/kombu raise
        ConsumerCancelled inside queue_delete otherwise): the caller answers, then calls
        ``notify_cancel`` of each (channel, tag) held. Deleting a missing queue succeeds with 0,
        as in RabbitMQ 3.x."""
        authz.queue_delete(self, queue)
        session = self.session
        session.held_cancels = held = []
        try:
            deleted = self.directory.change(self.vhost, "delete_queue",
                                            (queue or self.last_queue, if_unused, if_empty, session))
        except BaseException:
            session.held_cancels = None
            raise
        if not is_later(deleted):
            session.held_cancels = None
            return deleted, held

        async def later():
            try:
                return await deleted, held
            finally:
                session.held_cancels = None
        return later()

    # --- consumers -----------------------------------------------------------------------------

    def set_prefetch(self, count: int, size: int, global_: bool) -> None:
        """Global: the channel's shared limit; else the limit of consumers created from now on.
        The caller offers the new room to the queues (``resume_delivery``) after its answer."""
        if global_:
            self.prefetch_count, self.prefetch_size = count, size
        else:
            self.consumer_prefetch_count, self.consumer_prefetch_size = count, size
        if self.remote is not None:  # the other processes' queues our consumers read hear it
            self.remote.prefetch_changed()

    def set_flow(self, active: bool) -> None:
        """Whether deliveries may flow (0-9-1 channel.flow), after its answer."""
        self.sink.flow_active = active
        if active:
            self.resume_delivery()
        if self.remote is not None:
            self.remote.flow_changed(active)

    def consume(self, queue: str, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        """A new consumer (an empty tag: the broker names it), now or later (its ``tag``). The
        caller answers, then ``start_consumer`` hands it what is ready. ``credit``: the
        protocol's ``CreditTerms`` (warren/broker/credit.py) when the client grants credit; the
        consumer's ``credit`` is then its keeper, or the keeper's stand-in when the queue lives
        in another process."""
        if queue == reply_to.REPLY_TO:
            return reply_to.consume(self, tag, no_ack)
        authz.queue_read(self, queue)
        return then(self._handle_soon(queue or self.last_queue),
                    lambda q: self._consume_from(q, tag, no_ack, exclusive, arguments, credit))

    def _consume_from(self, q, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit):
        tag = tag or "amq.ctag-" + base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        if tag in self.consumers or (self.remote is not None and tag in self.remote.consumers):
            raise NotAllowed(f"attempt to reuse consumer tag '{tag}'")
        self.session.broker.limits.check_consumer(self, tag)  # consumer_max_per_channel
        priority = arguments.get("x-priority") if arguments else None
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise PreconditionFailed(f"invalid arg 'x-priority' for queue '{q.name}' in vhost '{self.vhost.name}': "
                                     f"\"expected integer, got {_type_name(priority)}\"")
        return q.consume(self, tag, no_ack, exclusive, arguments, credit)

    def start_consumer(self, consumer) -> None:
        """Deliver what the consumer's queue has ready (after the consume was answered)."""
        consumer.start()

    def cancel(self, tag: str) -> None:
        """End a consumer (an unknown tag is not an error)."""
        if self.reply_consumer is not None and tag == self.reply_consumer.tag:
            reply_to.release(self)
            return
        c = self.consumers.pop(tag, None)
        if c is not None:
            c.queue.remove_consumer(c)
        elif self.remote is not None:
            self.remote.cancel(tag)

    def consumer_cancelled_by_broker(self, c: Consumer) -> None:
        """The queue went away under a consumer: tell the client (the sink decides how)."""
        if self.consumers.pop(c.tag, None) is not None:
            self.cancelled_by_broker(c.tag)

    def cancelled_by_broker(self, tag: str) -> None:
        """Tell the client its consumer ``tag`` ended, after the answer to its own queue delete
        when this connection is deleting the queue (a consumer of a queue here or elsewhere)."""
        if self.closed:
            return
        held = self.session.held_cancels
        if held is not None:  # this connection is deleting the queue: after its answer
            held.append((self, tag))
        else:
            self.notify_cancel(tag)

    def notify_cancel(self, tag: str) -> None:
        if not self.closed:
            self.sink.cancelled(tag)

    # --- publish -------------------------------------------------------------------------------

    def publish(self, exchange: str, routing_key: str, properties: bytes, body, mandatory: bool) -> PublishOutcome:
        """Route and enqueue one message; the confirm (if selected) is recorded here."""
        ex = self.vhost.exchanges.get(exchange)
        if ex is not self.publish_allowed and self.publish_checked.get(exchange, authz.UNCHECKED) is not ex:
            authz.publish(self, exchange, routing_key)  # write permission (and topic permission), then cached
        if ex is None:
            raise NotFound(f"no exchange '{exchange}' in vhost '{self.vhost.name}'")
        if ex.internal:
            raise AccessRefused(f"cannot publish to internal exchange '{exchange}' in vhost '{self.vhost.name}'")
        self.stats_publish += 1
        ex.stats_publish_in += 1
        msg = self.new_message(exchange, routing_key, properties, body)
        if len(properties) >= 2 and (properties[0] & PUBLISH_CHECKS_HI or properties[1] & USER_ID_LO):
            self._check_properties(msg)
        if self.tx_mode:
            self.tx_publishes.append((ex, msg, mandatory))
            return _HELD
        confirms = self.confirms
        if confirms is None or not self.session.broker.notes_confirming:
            need = self._route(ex, msg, mandatory)
        else:
            broker = self.session.broker
            broker.confirming = confirms  # (Broker.confirming: a queue that refuses later says whose)
            try:
                need = self._route(ex, msg, mandatory)
            finally:
                broker.confirming = None
        if confirms is not None:  # refused by a queue (x-overflow reject-publish): a negative confirm
            confirms.published(need if need > 0 else 0, need == REFUSED)
        if need == 0:
            return _ROUTED
        if need > 0:
            return _PERSISTING
        if need == REFUSED:
            return _REFUSED
        return _RETURNED if mandatory else _DROPPED

    def publish_run(self, exchange: str, routing_key: str, properties: list, bodies: list, mandatory: bool) -> int:
        """``publish`` of each (properties[i], bodies[i]) in order, with the same exchange,
        routing key and flags (the 0-9-1 ``Publishes`` event: a publisher streaming to one
        destination). What is the same for all is done once: the exchange lookup, the checks
        of permission, internal exchange and transaction. An error stops the run where
        ``publish`` would have raised it; the rest of the run is then dropped, as the frames
        after a channel error are. Returns how many were published: fewer than all when one
        went to a congested queue (flow control), whose publisher is read no further until it
        drains; the caller keeps the rest for then, as unread frames would have waited."""
        self.run_stopped = False
        ex = self.vhost.exchanges.get(exchange)
        if (self.tx_mode or ex is None or ex.internal
                or (ex is not self.publish_allowed and self.publish_checked.get(exchange, authz.UNCHECKED) is not ex)):
            # one by one; the first publish checks the permission (and reports), and once it
            # is known the rest of the run goes the run's way
            self.publish(exchange, routing_key, properties[0], bodies[0], mandatory)
            if self.run_stopped or len(bodies) == 1:
                return 1
            if self.tx_mode or ex is None or ex.internal:
                done = 1
                for props, body in zip(properties[1:], bodies[1:]):
                    done += 1
                    self.publish(exchange, routing_key, props, body, mandatory)
                    if self.run_stopped:
                        break
                return done
            return 1 + self.publish_run(exchange, routing_key, properties[1:], bodies[1:], mandatory)
        route = self._route
        new_message = self.new_message
        confirms = self.confirms
        # the queues of every message of the run that routes by its key alone: routed once
        dests = ex.run_destinations(routing_key)
        # A plain Message is never in a cycle: the run's are made untracked (message.py), all at
        # once: one Message(...) for the first, the rest copies of it with their own octets.
        msgs = None
        if new_message is Message and len(bodies) > 1:
            msgs = clone_messages(Message(exchange, routing_key, properties[0], bodies[0]), properties, bodies)
            if msgs is not None and dests is not None and self._enqueue_run(ex, dests, msgs, properties, bodies):
                return len(msgs)
        untrack = _untrack if new_message is Message and msgs is None else None
        done = 0
        broker = self.session.broker if confirms is not None and self.session.broker.notes_confirming else None
        if broker is not None:
            broker.confirming = confirms  # (as in publish: each message's number is confirms' next)
        try:
            for props, body in zip(properties, bodies):
                if msgs is not None:
                    msg = msgs[done]
                else:
                    msg = new_message(exchange, routing_key, props, body)
                    if untrack is not None:
                        untrack(msg)
                done += 1
                hi = props[0]  # the C path gives a run whole property lists only (2 octets or more)
                if hi & PUBLISH_CHECKS_HI or props[1] & USER_ID_LO:
                    self._check_properties(msg)
                    need = route(ex, msg, mandatory)
                elif dests is None or (hi & HEADERS_HI and may_name_cc(props)):  # Exchange.route's test
                    need = route(ex, msg, mandatory)
                else:  # _route, inline, with the run's queues
                    need = 0
                    refused = False
                    for q in dests:
                        n = q.publish(msg)
                        if n > need:
                            need = n
                        elif n == REFUSED:
                            refused = True
                        if q.congested:
                            self.session.throttled_by(q)
                            self.run_stopped = True
                    if msg.persistent:
                        msg.routed()
                    if refused:
                        need = REFUSED
                if confirms is not None:
                    confirms.published(need if need > 0 else 0, need == REFUSED)
                if self.run_stopped:
                    break
        finally:
            if broker is not None:
                broker.confirming = None
            self.stats_publish += done
            ex.stats_publish_in += done
        return done

    def _enqueue_run(self, ex, dests, msgs: list, properties: list, bodies: list) -> bool:
        """The whole run into its queues at once (``Queue.enqueue_run``) when nothing can differ
        from one by one: every queue takes runs now (no consumer, no limit, store or TTL) and no
        property list asks for a check or routing of its own (reply-to, expiration, user-id,
        CC/BCC headers). False, with nothing done, otherwise. A publish-only flood (the
        shared matrix's pubonly rows) is this case; docs/performance.md, "The two-publisher rows"."""
        for q in dests:
            if not q.takes_runs():
                return False
        last = None
        for props in properties:  # the C path hands equal lists as one object: tested once
            if props is not last:
                hi = props[0]
                if (hi & PUBLISH_CHECKS_HI or props[1] & USER_ID_LO
                        or (hi & HEADERS_HI and may_name_cc(props))):
                    return False
                last = props
        size = sum(map(len, bodies))
        for q in dests:
            q.enqueue_run(msgs, size)
        n = len(msgs)
        confirms = self.confirms
        if confirms is not None:  # transient messages, taken: each confirmed as it comes
            published = confirms.published
            for _ in msgs:
                published(0, False)
        self.stats_publish += n
        ex.stats_publish_in += n
        return True

    def _check_properties(self, msg: Message) -> None:
        """The properties the broker acts on at publish time: reply-to, expiration, user-id."""
        properties = msg.properties
        if properties[0] & REPLY_TO_HI:
            reply_to.rewrite(self, msg)
        if properties[0] & EXPIRATION_HI:
            msg.check_expiration()
        if properties[1] & USER_ID_LO:
            user_id = msg.decoded.user_id
            if user_id is not None and user_id != self.session.username and not authz.may_impersonate(self):
                raise PreconditionFailed(f"user_id property set to '{user_id}' but authenticated user was "
                                         f"'{self.session.username}'")

    def _route(self, ex, msg: Message, mandatory: bool) -> int:
        """Route and enqueue; returns the sync number the message's durability waits for (or 0),
        REFUSED when a queue turned it away (``Queue.publish``, x-overflow reject-publish), or
        _UNROUTED when no queue took it (returned to the sink if mandatory)."""
        queues = ex.route(msg, (msg.routing_key,))
        if not queues:
            if mandatory:
                self.stats_unroutable_returned += 1
                self.sink.returned(msg)
            else:
                self.stats_unroutable_dropped += 1
            return _UNROUTED
        need = 0
        refused = False
        for q in queues:
            n = q.publish(msg)
            if n > need:
                need = n
            elif n == REFUSED:
                refused = True
            if q.congested:  # flow control: its backlog is over the mark (queues/flow_marks.py)
                self.session.throttled_by(q)
                self.run_stopped = True  # publish_run hands the rest of its run back
        if msg.persistent:
            msg.routed()
        return REFUSED if refused else need  # REFUSED by any queue: the publisher gets a nack

    # --- confirms ------------------------------------------------------------------------------

    def select_confirms(self) -> None:
        if self.tx_mode:
            raise PreconditionFailed("cannot switch from tx to confirm mode")
        if self.confirms is None:
            self.confirms = Confirms(self.session.durability, self._confirms_ready)

    def _confirms_ready(self, confirms: Confirms) -> None:
        """Something can be confirmed (``Confirms.settle``): the adapter settles it when it
        writes next (0-9-1: one basic.ack per channel per write batch)."""
        raise NotImplementedError

    # --- get, settle ---------------------------------------------------------------------------

    def get(self, queue: str, no_ack: bool):
        """One message taken from a queue: (delivery tag, redelivered, message, messages left),
        or None when it is empty; now or later."""
        authz.queue_read(self, queue)
        return then(then(self._handle_soon(queue or self.last_queue), lambda q: q.get(self, no_ack)),
                    lambda got: self._got(got, no_ack))

    def _got(self, got, no_ack: bool):
        if got is None:
            return None
        settles, seq, msg, redelivered, left = got  # settles: the queue, or its handle's settler
        tag = self.next_tag
        self.next_tag = tag + 1
        if not no_ack:
            self.unacked[tag] = (settles, seq, msg, None, tag)
        return tag, redelivered, msg, left

    def _take_unacked(self, tag: int, multiple: bool) -> list[tuple]:
        unacked = self.unacked
        if multiple:
            if tag == 0:
                tags = list(unacked)
            else:
                if tag not in unacked and (not unacked or tag >= self.next_tag):
                    raise PreconditionFailed(f"unknown delivery tag {tag}")
                tags = []
                for t in unacked:  # insertion order is tag order
                    if t > tag:
                        break
                    tags.append(t)
            return [unacked.pop(t) for t in tags]
        entry = unacked.pop(tag, None)
        if entry is None:
            raise PreconditionFailed(f"unknown delivery tag {tag}")
        return [entry]

    def release_counts(self, entries) -> None:
        """Take deliveries off their consumers' and the channel's prefetch counts as they leave
        the channel some other way than ``settle_entries`` (a 0-10 release without redelivered mark,
        a dtx branch handing them to another worker). ``settle_entries`` does the same inline: one
        pass over the entries on the ack path."""
        for _q, _seq, msg, consumer, _tag in entries:
            if consumer is not None:
                size = len(msg.body)
                consumer.unacked -= 1
                consumer.unacked_bytes -= size
                self.consumer_unacked -= 1
                self.consumer_unacked_bytes -= size

    def settle_entries(self, entries: list[tuple], requeue: bool | None) -> None:
        """requeue: True puts the messages back, False rejects them, None (ack) forgets them."""
        if requeue is None:
            self.stats_ack += len(entries)
        touched = set()
        requeued = defaultdict(list)
        acked: dict = {}  # queue -> [(seq, message)]: forgotten together (one store call per queue)
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
                if q.store is None:
                    q.forget(seq, msg)
                else:  # forgotten together below: one store call for the run
                    items = acked.get(q)
                    if items is None:
                        items = acked[q] = []
                    items.append((seq, msg))
            else:  # rejected or nacked without requeue: dead-lettered if the queue says so
                q.reject(seq, msg)
        for q, items in acked.items():
            q.forget_run(items)
        for q, items in requeued.items():
            q.requeue(items)
            touched.discard(q)
        if self.prefetch_count or self.prefetch_size:
            self.share_room(touched)
        else:
            for q in touched:
                q.dispatch()

    def share_room(self, touched=()) -> None:
        """Room under the channel's shared (global) prefetch belongs to the whole channel: every
        queue its consumers read gets a turn, not only those whose messages were settled (a
        queue blocked on the shared count would otherwise wait for its next publish). RabbitMQ's
        limiter likewise wakes every queue it blocked. The first queue to dispatch takes all the
        room it can use, so the turn rotates: a busy queue does not take every freed slot."""
        sources = list(dict.fromkeys([*touched, *(c.queue for c in self.consumers.values()), *self.room_takers()]))
        if not sources:
            return
        start = self._room_turn % len(sources)
        self._room_turn += 1
        for q in sources[start:] + sources[:start]:
            q.dispatch()

    def room_takers(self):
        """What besides this channel's own consumers' queues takes room under the shared
        prefetch: the other processes whose queues its consumers read."""
        return self.remote.room_takers() if self.remote is not None else ()

    def _settle_tags(self, tag: int, multiple: bool, requeue: bool | None) -> None:
        entries = self._take_unacked(tag, multiple)
        if self.tx_mode:
            self.tx_settles.append((entries, requeue))
            return
        self.settle_entries(entries, requeue)

    def ack(self, tag: int, multiple: bool) -> None:
        """The deliveries are done with (``multiple``: every one up to ``tag``; tag 0: all)."""
        self._settle_tags(tag, multiple, None)

    def ack_run(self, tags: list[int]) -> None:
        """Consecutive single acks (``Acks``: a consumer acking one by one), as ``ack(tag, False)``
        for each in turn would: settled together, so the queues dispatch once for all of them.
        An unknown tag refuses the channel (406) after the acks before it are settled."""
        unacked = self.unacked
        entries = []
        bad = None
        for tag in tags:
            entry = unacked.pop(tag, None)
            if entry is None:
                bad = tag
                break
            entries.append(entry)
        if entries:
            if self.tx_mode:
                self.tx_settles.append((entries, None))
            else:
                self.settle_entries(entries, None)
        if bad is not None:
            raise PreconditionFailed(f"unknown delivery tag {bad}", 60, 80)

    def reject(self, tag: int, multiple: bool, requeue: bool) -> None:
        """Requeue the deliveries (release), or let them die (dead-lettered if the queue says so)."""
        self._settle_tags(tag, multiple, requeue)

    def annotate(self, tag: int, headers: dict) -> None:
        """AMQP 1.0's ``modified`` outcome with message annotations (as 0-9-1 headers) for the
        unacked delivery ``tag``, before its ``reject``: its queue decides whether they join the
        message (``QueueBase.annotate``: quorum queues only, as RabbitMQ 4)."""
        entry = self.unacked.get(tag)
        if entry is not None:
            entry[0].annotate(entry[1], headers)

    def recover(self) -> None:
        """Every unacked delivery back to its queue."""
        entries = list(self.unacked.values())
        self.unacked.clear()
        self.settle_entries(entries, True)

    # --- transactions --------------------------------------------------------------------------

    def select_tx(self) -> None:
        if self.confirms is not None:
            raise PreconditionFailed("cannot switch from confirm to tx mode")
        self.tx_mode = True

    def commit(self) -> bool:
        """Publish and settle what the transaction holds. True when it is complete now; False
        when its persistent messages wait for the disk: ``tx_committed`` is called then."""
        if not self.tx_mode:
            raise PreconditionFailed("channel is not transactional")
        publishes, settles = self.tx_publishes, self.tx_settles
        self.tx_publishes, self.tx_settles = [], []
        need = 0
        for ex, msg, mandatory in publishes:
            need = max(need, self._route(ex, msg, mandatory))
        for entries, requeue in settles:
            self.settle_entries(entries, requeue)
        durability = self.session.durability
        if need and need > durability.synced:
            self.commit_waits_for = need  # complete once the messages are on disk
            durability.waiting.add(self)
            return False
        return True

    def tx_committed(self) -> None:
        """A commit that waited for the disk is complete (the adapter answers it)."""
        raise NotImplementedError

    def synced(self, number: int) -> None:
        """A sync completed (called by Durability): a commit that waited for it completes."""
        if self.closed:
            return
        if self.commit_waits_for and number >= self.commit_waits_for:
            self.commit_waits_for = 0
            self.tx_committed()
        if self.commit_waits_for:
            self.session.durability.waiting.add(self)

    def rollback(self) -> None:
        if not self.tx_mode:
            raise PreconditionFailed("channel is not transactional")
        self.tx_publishes = []
        # acks inside the rolled-back transaction are undone: the messages stay unacked
        self._restore_tx_settles()

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
        self.sink.stop()  # nothing more goes out: a queue dispatching meanwhile skips its consumers
        TOTALS.channel_closed(self)  # its counts outlive it (warren/broker/totals.py)
        reply_to.release(self)
        for c in list(self.consumers.values()):
            c.queue.remove_consumer(c)
        self.consumers.clear()
        self._restore_tx_settles()  # uncommitted acks never happened
        if self.remote is not None:  # the processes whose queues it read drop its part there first:
            self.remote.channel_closed()  # their consumers go, what it held is requeued there, once
        entries = list(self.unacked.values())
        self.unacked.clear()
        self.tx_publishes = []
        if entries:
            self.settle_entries(entries, True)


def _nothing(_result) -> None:
    """What a change without an answer of its own answers (a declare-ok, a bind-ok)."""


def _type_name(value) -> str:
    """RabbitMQ's name for a field value's type, for its "expected integer" refusals."""
    for kind, name in ((bool, "bool"), (str, "longstr"), (bytes, "binary"), (float, "double"),
                       (dict, "table"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "void" if value is None else type(value).__name__
