"""Consumers across workers: both ends of a channel that reads a queue another worker owns.

**On the owner** a channel of a connection on another worker is a ``ProxyChannel``: a plain
``BrokerChannel`` (consumers, prefetch, delivery tags, acks, rejects, requeues on close: all
the one-process code) whose ``DeliverySink`` is a ``PeerSink``, which sends each delivery over
the link instead of writing basic.deliver. The sink's ``can_accept`` is a window: at most
``WINDOW`` deliveries sent and not yet written out by the consuming worker, which hands the
room back (``credit``) as it writes them; so a no-ack consumer's queue is not emptied into a
link faster than its client reads, and a prefetch limit works as in one process.

**On the consuming worker** (``SpreadChannel`` in ``channel.py``) each delivery gets the
channel's own delivery tag, and its unacked record names a ``RemoteSettler`` in place of the
queue: an ack, reject or requeue of it (``BrokerChannel._settle``, unchanged) becomes a
``settle`` message to the owner with the owner's delivery tags.
"""

from __future__ import annotations

from warren.broker.channel import BrokerChannel
from warren.codec.fields import encode_shortstr

__all__ = ["ProxySession", "ProxyChannel", "PeerSink", "RemoteSettler", "RemoteConsumer", "WINDOW"]

WINDOW = 4096  # deliveries in flight to the consuming worker, per channel


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
    __slots__ = ("spread", "worker", "session_id", "number", "in_flight", "stopped", "channel", "flow_active")

    def __init__(self, spread, worker: int, session_id: int, number: int) -> None:
        self.spread = spread
        self.worker = worker
        self.session_id = session_id
        self.number = number
        self.in_flight = 0
        self.stopped = False
        self.channel = None
        self.flow_active = True

    def can_accept(self) -> bool:
        return not self.stopped and self.in_flight < WINDOW

    def deliver(self, consumer, tag: int, redelivered: bool, message) -> None:
        self.in_flight += 1
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


class ProxyChannel(BrokerChannel):
    pass


class RemoteSettler:
    """On the consuming worker: where ``BrokerChannel._settle`` sends the acks, rejects and
    requeues of deliveries from one owner (in place of a queue; ``seq`` is the owner's tag)."""

    store = True  # _settle: acks go through forget_run, one message per run
    stats_ack = 0
    stats_deliver = 0
    stats_redeliver = 0

    def __init__(self, spread, owner: int, session_id: int, number: int) -> None:
        self.spread = spread
        self.owner = owner
        self.session_id = session_id
        self.number = number

    def _settle(self, tags: list, requeue) -> None:
        self.spread.tell(self.owner, "settle", self.session_id, self.number, tags, requeue)

    def forget_run(self, items) -> None:
        self._settle([seq for seq, _ in items], None)

    def forget(self, seq: int, msg) -> None:
        self._settle([seq], None)

    def requeue(self, items) -> None:
        self._settle([seq for seq, _ in items], True)

    def reject(self, seq: int, msg) -> None:
        self._settle([seq], False)

    def dispatch(self) -> None:
        pass


class RemoteConsumer:
    """On the consuming worker: a consumer whose queue is on ``owner`` (what the sink needs of a
    ``Consumer``, and deliveries held until consume-ok is written)."""

    __slots__ = ("tag", "tag_ss", "owner", "no_ack", "queue_name", "pending")

    def __init__(self, tag: str, owner: int, no_ack: bool, queue_name: str) -> None:
        self.tag = tag
        self.tag_ss = encode_shortstr(tag)
        self.owner = owner
        self.no_ack = no_ack
        self.queue_name = queue_name
        self.pending: list | None = []  # deliveries that came before consume-ok went out
