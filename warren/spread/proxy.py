"""Consumers across workers: both ends of a channel that reads a queue another worker owns.

**On the owner** a channel of a connection on another worker is a ``ProxyChannel``: a plain
``BrokerChannel`` (consumers, prefetch, delivery tags, acks, rejects, requeues on close: all
the one-process code) whose ``DeliverySink`` is a ``PeerSink``, which sends each delivery over
the link instead of writing basic.deliver. The sink's ``can_accept`` is a window: at most
``WINDOW`` deliveries sent and not yet written out by the consuming worker, which hands the
room back (``credit``) as it writes them; so a no-ack consumer's queue is not emptied into a
link faster than its client reads, and a prefetch limit works as in one process.

**On the consuming worker** (the channel's ``RemoteReads``, ``remote_reads.py``) each delivery
gets the channel's own delivery tag, and its unacked record names a ``RemoteSettler`` in place of the
queue: an ack, reject or requeue of it (``BrokerChannel.settle_entries``, unchanged) becomes a
``settle`` message to the owner with the owner's delivery tags.
"""

from __future__ import annotations

from warren.broker.channel import BrokerChannel
from warren.spec.fields import encode_shortstr
from warren.codec.amqp0_10.types import encode_command
from warren.protocol.amqp0_10.delivery import NO_BODY, WINDOW as WINDOW_MODE, header_segment
from warren.spec.amqp0_10 import MessageTransfer
from warren.spread.shared_prefetch import Borrower

__all__ = ["ProxySession", "ProxyChannel", "PeerSink", "SubscriptionSink", "RemoteSettler", "RemoteConsumer",
           "RemoteSubscription", "RemoteSettling", "handlers_of", "WINDOW"]

WINDOW = 4096  # deliveries in flight to the consuming worker, per channel
UNMARKED = "unmarked"  # a settle's requeue: back to the queue, not marked redelivered


class _AllowAll:
    """The consuming worker checked the user's permissions before it asked (``channel.py``)."""

    def allowed(self, permission: str, kind: str, name: str) -> bool:
        return True

    def topic_allowed(self, permission: str, exchange: str, routing_key: str) -> bool:
        return True


class ProxySession:
    """On the owner: a connection on another worker, as its channels here need one."""

    publisher_id = None
    writable = True
    held_cancels = None
    closed = False

    def __init__(self, spread, worker: int, session_id: int, vhost) -> None:
        self.broker = spread.broker
        self.durability = spread.broker.durability
        self.limits = spread.broker.limits
        self.vhost = vhost
        self.worker = worker
        self.session_id = session_id
        self.username = f"(worker {worker})"
        self.access = _AllowAll()
        self.capabilities = {"consumer_cancel_notify": True}
        self.channels: dict[int, ProxyChannel] = {}
        self.exclusive_queues: set = set()

    def throttled_by(self, queue) -> None:
        pass  # a proxy channel never publishes

    def want_flush(self) -> None:
        pass


class PeerSink:
    __slots__ = ("spread", "worker", "session_id", "number", "in_flight", "stopped", "channel", "flow_active",
                 "paused")

    def __init__(self, spread, worker: int, session_id: int, number: int) -> None:
        self.spread = spread
        self.worker = worker
        self.session_id = session_id
        self.number = number
        self.in_flight = 0
        self.stopped = False
        self.channel = None
        self.flow_active = True
        self.paused = False  # the consuming channel's client said channel.flow(false)

    def can_accept(self) -> bool:
        return not self.stopped and not self.paused and self.in_flight < WINDOW

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        self.in_flight += 1
        if consumer.no_ack:
            tag = None  # nothing to settle, and the consuming channel's prefetch does not count it
        self.spread.send_delivery(self.worker, (self.session_id, self.number, consumer.tag, tag, redelivered,
                                                message.exchange, message.routing_key, bytes(message.properties),
                                                bytes(message.body)))

    def credit(self, n: int) -> None:
        full = self.in_flight >= WINDOW
        self.in_flight -= n
        if full and self.in_flight < WINDOW and self.channel is not None and not self.channel.closed:
            self.channel.resume_delivery()

    def returned(self, message) -> None:
        pass  # a proxy channel never publishes

    def cancelled(self, consumer_tag: str) -> None:
        self.spread.tell(self.worker, "cancelled", self.session_id, self.number, consumer_tag)

    def stop(self) -> None:
        self.stopped = True


class SubscriptionSink(PeerSink):
    """The ``PeerSink`` of a 0-10 session's channel: its consumers are subscriptions, whose
    credit (``warren/protocol/amqp0_10/delivery.py``'s ``Subscription``, unchanged) is kept
    here on the owner, next to the queue it is checked against. Each delivery carries what the
    consuming worker needs to write the transfer and give window credit back: the queue
    sequence number of a browsed copy (None when acquired) and the credit it cost."""

    __slots__ = ("subscriptions",)

    def __init__(self, spread, worker: int, session_id: int, number: int) -> None:
        super().__init__(spread, worker, session_id, number)
        self.subscriptions: dict = {}  # consumer tag (the destination) -> Subscription

    def cost(self, msg, destination: str) -> int:
        return len(header_segment(msg, False)) + len(msg.body)

    def _charge(self, sub, message) -> int:
        cost = self.cost(message, sub.destination) if sub.octets is not None or sub.mode == WINDOW_MODE else 0
        sub.charge(cost)
        return cost

    def _send(self, tag: str, owner_tag, redelivered: bool, message, seq, cost: int) -> None:
        self.in_flight += 1
        body = message.body
        self.spread.send_delivery(self.worker, (self.session_id, self.number, tag, owner_tag, redelivered,
                                                message.exchange, message.routing_key, bytes(message.properties),
                                                None if body is NO_BODY else bytes(body), seq, cost))

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        sub = self.subscriptions.get(consumer.tag)
        cost = 0 if sub is None else self._charge(sub, message)
        self._send(consumer.tag, tag, redelivered, message, None, cost)

    def browse(self, sub, seq: int, message, redelivered: bool) -> None:
        self._send(sub.destination, None, redelivered, message, seq, self._charge(sub, message))


class ProxyChannel(Borrower, BrokerChannel):
    """The owner's channel for a channel on another worker (its shared prefetch: ``Borrower``)."""


class RemoteSettler:
    """On the consuming worker: where ``BrokerChannel.settle_entries`` sends the acks, rejects and
    requeues of deliveries from one owner (in place of a queue; ``seq`` is the owner's tag)."""

    store = True  # settle_entries: acks go through forget_run, one message per run
    stats_ack = 0
    stats_deliver = 0
    stats_redeliver = 0

    def __init__(self, spread, owner: int, session_id: int, number: int) -> None:
        self.spread = spread
        self.owner = owner
        self.session_id = session_id
        self.number = number

    def settle_entries(self, tags: list, requeue) -> None:
        self.spread.tell(self.owner, "settle", self.session_id, self.number, tags, requeue)

    def forget_run(self, items) -> None:
        self.settle_entries([seq for seq, _ in items], None)

    def forget(self, seq: int, msg) -> None:
        self.settle_entries([seq], None)

    def requeue(self, items, redelivered: bool = True) -> None:
        # a 0-10 release without set-redelivered puts them back unmarked (message.py)
        self.settle_entries([seq for seq, _ in items], True if redelivered else UNMARKED)

    def reject(self, seq: int, msg) -> None:
        self.settle_entries([seq], False)

    def dispatch(self) -> None:
        pass


class RemoteConsumer:
    """On the consuming worker: a consumer whose queue is on ``owner`` (what the sink needs of a
    ``Consumer``, and deliveries held until consume-ok is written). Its unacked deliveries name
    it, as a local consumer's do, so that ``BrokerChannel.settle_entries`` counts them off the
    channel's prefetch; ``queue`` is then the owner's ``RemoteSettler`` (its dispatch: nothing)."""

    __slots__ = ("tag", "tag_ss", "owner", "no_ack", "queue_name", "pending", "queue", "unacked", "unacked_bytes",
                 "reads")

    def __init__(self, tag: str, owner: int, no_ack: bool, queue_name: str, settler: RemoteSettler, reads) -> None:
        self.reads = reads  # the channel's RemoteReads (remote_reads.py)
        self.tag = tag
        self.tag_ss = encode_shortstr(tag)
        self.owner = owner
        self.no_ack = no_ack
        self.queue_name = queue_name
        self.queue = settler
        self.unacked = 0
        self.unacked_bytes = 0
        self.pending: list | None = []  # deliveries that came before consume-ok went out

    def start(self) -> None:
        """Its consume was answered (``BrokerChannel.start_consumer``)."""
        self.reads.start(self)


class RemoteSubscription:
    """On the consuming worker: a 0-10 subscription to a queue on ``owner``. Its credit is kept
    by the owner (``SubscriptionSink``); what ``message.py`` does to a subscription (flow,
    flow mode, window credit given back) is told to the owner. ``queue`` is the queue's record."""

    __slots__ = ("tag", "destination", "queue", "owner", "spread", "session_id", "number", "consumer",
                 "accept_mode", "acquire_mode", "mode", "command_id", "transfer_commands", "no_ack", "pending")

    def __init__(self, spread, queue, session_id: int, number: int, tag: str, destination: str, accept_mode: int,
                 acquire_mode: int, no_ack: bool, command_id: int) -> None:
        self.spread = spread
        self.queue = queue
        self.owner = queue.owner
        self.session_id = session_id
        self.number = number
        self.tag = tag  # the owner's consumer tag: the destination, or one made for an empty one
        self.destination = destination
        self.consumer = self  # message.py cancels ``sub.consumer.tag``
        self.accept_mode = accept_mode
        self.acquire_mode = acquire_mode
        self.no_ack = no_ack
        self.mode = WINDOW_MODE
        self.command_id = command_id
        self.transfer_commands = tuple(
            encode_command(MessageTransfer(destination=destination, accept_mode=accept_mode, acquire_mode=mode))
            for mode in (0, 1))  # pre-acquired, not-acquired (browsed copies)
        self.pending: list | None = []  # deliveries that came before the subscribe completed

    def _tell(self, op: str, *args) -> None:
        self.spread.tell(self.owner, op, self.session_id, self.number, self.tag, *args)

    def add(self, unit: int, value) -> None:
        self._tell("sub_flow", unit, value)

    def set_mode(self, mode: int) -> None:
        self.mode = mode
        self._tell("sub_mode", mode)

    def give_back(self, cost: int) -> None:
        self._tell("sub_credit", cost)


class RemoteSettling:
    """What both reading sides on a consuming worker (``remote_reads.py``, ``channel_0_10.py``)
    share: one ``RemoteSettler`` per owner whose deliveries they hold, made on first use, and
    telling those owners when the channel closes."""

    settlers: dict | None = None  # owner -> RemoteSettler

    def _settler(self, owner: int) -> RemoteSettler:
        if self.settlers is None:
            self.settlers = {}
        settler = self.settlers.get(owner)
        if settler is None:
            settler = self.settlers[owner] = RemoteSettler(self.session.broker.directory, owner, id(self.session),
                                                           self.number)
        return settler

    def _tell_owners_closed(self, owners) -> None:
        """After the channel's own close settled what it held: each owner drops our consumers
        or subscriptions and requeues what was in flight to us."""
        spread = self.session.broker.directory
        for owner in owners:
            spread.tell(owner, "close_channel", id(self.session), self.number)


def handlers_of(cls, classes: dict, known=None) -> dict:
    """{INDEX: handler} for the ``handle_<name>`` methods ``cls`` itself defines among the
    protocol's ``classes`` (methods or commands); with ``known``, only those indexes."""
    table = {}
    for index, spec_class in classes.items():
        fn = cls.__dict__.get("handle_" + spec_class.NAME.replace(".", "_").replace("-", "_"))
        if fn is not None and (known is None or index in known):
            table[index] = fn
    return table
