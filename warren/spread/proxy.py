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
from warren.errors import NotFound
from warren.protocol.amqp0_10.delivery import NO_BODY
from warren.spec.fields import encode_shortstr
from warren.spread.shared_prefetch import Borrower

__all__ = ["ProxySession", "ProxyChannel", "PeerSink", "RemoteSettler", "RemoteConsumer", "KeeperLink",
           "RemoteSettling", "handlers_of", "WINDOW"]

WINDOW = 4096  # deliveries in flight to the consuming worker, per channel
UNMARKED = "unmarked"  # a settle's requeue: back to the queue, not marked redelivered
ANNOTATE = "annotate"  # a settle's requeue: not settled yet, its message annotated (1.0's modified)


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
        credit = consumer.credit
        if credit is not None:  # a 0-10 subscription's or a 1.0 link's keeper (warren/broker/credit.py)
            credit.charge_for(message)
        if consumer.no_ack:
            tag = None  # nothing to settle, and the consuming channel's prefetch does not count it
        self._send(consumer.tag, tag, redelivered, message, None)

    def browse(self, keeper, seq: int, message, redelivered: bool) -> None:
        """A copy the queue keeps (a 0-10 browsing subscription): sent with its queue sequence
        number, which an acquire names later."""
        keeper.charge_for(message)
        self._send(keeper.consumer.tag, None, redelivered, message, seq)

    def _send(self, consumer_tag: str, tag, redelivered: bool, message, seq) -> None:
        self.in_flight += 1
        body = message.body
        self.spread.send_delivery(self.worker, (self.session_id, self.number, consumer_tag, tag, redelivered,
                                                message.exchange, message.routing_key, bytes(message.properties),
                                                None if body is NO_BODY else bytes(body), seq))

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

    def annotate(self, seq: int, headers: dict) -> None:
        # before the reject or requeue that follows it, on the same link: in order at the owner
        self.spread.tell(self.owner, "settle", self.session_id, self.number, [seq], ANNOTATE, headers)

    def dispatch(self) -> None:
        pass


class RemoteConsumer:
    """On the consuming worker: a consumer whose queue is on ``owner`` (what the sink needs of a
    ``Consumer``, and deliveries held until consume-ok is written). Its unacked deliveries name
    it, as a local consumer's do, so that ``BrokerChannel.settle_entries`` counts them off the
    channel's prefetch; ``queue`` is then the owner's ``RemoteSettler`` (its dispatch: nothing)."""

    __slots__ = ("tag", "tag_ss", "owner", "no_ack", "queue_name", "pending", "queue", "unacked", "unacked_bytes",
                 "reads", "credit", "terms")

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
        self.credit = None  # the stand-in of its credit keeper on the owner (warren/broker/credit.py), if any
        # its consume's exclusive flag, arguments and CreditTerms (a cluster consumes again with them)
        self.terms = (False, {}, None)

    def start(self) -> None:
        """Its consume was answered (``BrokerChannel.start_consumer``)."""
        self.reads.start(self)


class KeeperLink:
    """On the consuming worker: how a credit keeper's stand-in (``CreditTerms.far``,
    warren/broker/credit.py) reaches the keeper beside the queue on ``owner``: ``tell`` an
    operation, or ``ask`` one, answered after the deliveries it allowed."""

    __slots__ = ("spread", "owner", "session_id", "number", "tag")

    def __init__(self, spread, owner: int, session_id: int, number: int, tag: str) -> None:
        self.spread = spread
        self.owner = owner
        self.session_id = session_id
        self.number = number
        self.tag = tag

    def tell(self, op: str, *args) -> None:
        self.spread.tell(self.owner, "keeper", self.session_id, self.number, self.tag, op, args)

    def ask(self, op: str, *args, gone=None):
        """An awaitable of the keeper's answer; ``gone`` if it cannot be asked any more (its
        node died: the consumer is kept for the queue's next leader, or cancelled): nothing more
        comes from it, which is what a flush, a stop or a drain waits for."""
        return _unless_gone(self.spread.ask(self.owner, "keeper_ask", self.session_id, self.number, self.tag, op,
                                            args), gone)


async def _unless_gone(answer, gone):
    try:
        return await answer
    except NotFound:
        return gone


class RemoteSettling:
    """What a reading side on a consuming worker (``remote_reads.py``) has: one
    ``RemoteSettler`` per owner whose deliveries it holds, made on first use, and telling those
    owners when the channel closes."""

    settlers: dict | None = None  # owner -> RemoteSettler
    spread = None  # what reaches the owners (a Spread, or a cluster's NodeReach)

    def _settler(self, owner: int) -> RemoteSettler:
        if self.settlers is None:
            self.settlers = {}
        settler = self.settlers.get(owner)
        if settler is None:
            settler = self.settlers[owner] = RemoteSettler(self.spread, owner, id(self.session), self.number)
        return settler

    def _tell_owners_closed(self, owners) -> None:
        """After the channel's own close settled what it held: each owner drops our consumers
        or subscriptions and requeues what was in flight to us."""
        for owner in owners:
            self.spread.tell(owner, "close_channel", id(self.session), self.number)


def handlers_of(cls, classes: dict, known=None) -> dict:
    """{INDEX: handler} for the ``handle_<name>`` methods ``cls`` itself defines among the
    protocol's ``classes`` (methods or commands); with ``known``, only those indexes."""
    table = {}
    for index, spec_class in classes.items():
        fn = cls.__dict__.get("handle_" + spec_class.NAME.replace(".", "_").replace("-", "_"))
        if fn is not None and (known is None or index in known):
            table[index] = fn
    return table
