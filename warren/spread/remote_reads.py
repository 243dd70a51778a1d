"""What one channel reads from queues other workers own: the directory's part of a channel.

A channel consumes from or gets from any queue through the same ``BrokerChannel`` operations,
whatever its protocol; when the queue is another worker's, its handle (``RemoteQueue``) hands
the work to this part of the channel, made on first use (``Spread.reads_of``):

* **consume**: the owner serves the consumer on its side of the channel (a ``ProxyChannel``,
  ``proxy.py``) and sends each delivery over the link; here each one gets the channel's own
  delivery tag and goes to the channel's ``DeliverySink`` as a local delivery does, and its
  unacked record names the owner's ``RemoteSettler``, so an ack, reject or requeue
  (``BrokerChannel.settle_entries``, unchanged) goes back to the owner. Deliveries that come
  before the consume is answered, or while the client said channel.flow(false), wait here.
* **credit**: a consumer whose protocol grants credit (0-10 subscriptions, 1.0 links) has its
  keeper on the owner, beside the queue (``CreditTerms``, warren/broker/credit.py); here it
  holds the keeper's stand-in, which passes the client's grants on (``KeeperLink``).
* **get**, and 0-10's **acquire** of browsed copies: asked of the owner, settled the same way.
* **shared prefetch**: the channel's global count lives here and the owners borrow from it
  (``shared_prefetch.Lender``).
* **close**: the owners drop the channel's consumers and requeue what was in flight to it.
"""

from __future__ import annotations

from warren.broker.message import Message
from warren.errors import InternalError
from warren.protocol.amqp0_10.delivery import NO_BODY
from warren.spread.links import PeerGone
from warren.spread.proxy import KeeperLink, RemoteConsumer, RemoteSettling
from warren.spread.shared_prefetch import Lender

__all__ = ["RemoteReads"]


class RemoteReads(RemoteSettling):
    def __init__(self, spread, channel) -> None:
        self.spread = spread
        self.channel = channel
        self.session = channel.session  # (RemoteSettling: the settlers' session and channel number)
        self.number = channel.number
        self.consumers: dict[str, RemoteConsumer] = {}  # by tag: what the HTTP API lists
        self.lender = Lender(spread, channel)

    async def _ask(self, owner: int, op: str, *args):
        try:
            return await self.spread.ask(owner, op, *args)
        except PeerGone as e:
            raise InternalError(f"another worker did not answer: {e}") from None

    def _prefetch(self) -> tuple:
        ch = self.channel
        return ch.consumer_prefetch_count, ch.consumer_prefetch_size, ch.prefetch_count, ch.prefetch_size

    # --- what the queue's handle asks (RemoteQueue) ------------------------------------------

    def consume(self, q, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        ref = self.spread.session_ref(self.session)
        rc = RemoteConsumer(tag, q.owner, no_ack, q.name, self._settler(q.owner), self)
        rc.terms = (exclusive, arguments, credit)
        terms = None
        if credit is not None:
            rc.credit = credit.far(KeeperLink(self.spread, q.owner, ref.session_id, self.number, tag), rc, q)
            terms = (credit.KIND, credit.args)
        self.consumers[tag] = rc
        prefetch = self._prefetch()  # as the channel has it now (a 1.0 stream link's is set for this call)

        async def consume():
            try:
                await self._ask(q.owner, "consume", q.vhost_name, q.name, ref.session_id, self.number, tag, no_ack,
                                exclusive, arguments, *prefetch, terms)
            except BaseException:
                if self.consumers.get(tag) is rc:  # refused: the tag is free again
                    del self.consumers[tag]
                raise
            return rc
        return consume()

    def start(self, rc: RemoteConsumer) -> None:
        """``rc``'s consume was answered: what came for it meanwhile is delivered now."""
        pending, rc.pending = rc.pending, None
        for item in pending or ():
            self.remote_deliver(rc.owner, item, False)

    def get(self, q, no_ack: bool):
        ref = self.spread.session_ref(self.session)
        settler = self._settler(q.owner)  # also what makes our close tell the owner to drop its channel

        async def get():
            got = await self._ask(q.owner, "get", q.vhost_name, q.name, ref.session_id, self.number, no_ack)
            if got is None:
                return None
            owner_tag, redelivered, exchange, routing_key, properties, body, left = got
            return settler, owner_tag, Message(exchange, routing_key, properties, body), redelivered, left
        return get()

    def acquire(self, q, seqs: list):
        """0-10's message.acquire of browsed copies, asked of the owner: an awaitable of what
        ``QueueBase.acquire`` returns, with the owner's settler in place of the queue."""
        ref = self.spread.session_ref(self.session)
        settler = self._settler(q.owner)

        async def acquire():
            taken = await self._ask(q.owner, "acquire", q.vhost_name, q.name, ref.session_id, self.number, seqs)
            return {seq: (settler, owner_tag, None) for seq, owner_tag in taken}
        return acquire()

    # --- what the channel tells (BrokerChannel) ------------------------------------------------

    def cancel(self, tag: str) -> None:
        rc = self.consumers.pop(tag, None)
        if rc is None:
            return  # an unknown tag is not an error
        if rc.pending and not rc.no_ack:  # held while channel.flow was off: back to the queue
            self._settler(rc.owner).settle_entries([item[3] for item in rc.pending], True)
            for item in rc.pending:
                self.lender.uncount(len(item[8] or b""))
        self.spread.tell(rc.owner, "cancel", id(self.session), self.number, tag)

    def prefetch_changed(self) -> None:
        if self.consumers:
            for owner in {rc.owner for rc in self.consumers.values()}:
                self.spread.tell(owner, "qos", id(self.session), self.number, *self._prefetch())
        self.lender.prefetch_changed()

    def flow_changed(self, active: bool) -> None:
        """channel.flow: the owners stop (or go on) sending; what was on its way meanwhile
        waits here for the flow to come back."""
        if not self.consumers:
            return
        for owner in {rc.owner for rc in self.consumers.values()}:
            self.spread.tell(owner, "flow", id(self.session), self.number, active)
        if active:
            for rc in list(self.consumers.values()):
                held, rc.pending = rc.pending, None
                for item in held or ():
                    self.remote_deliver(rc.owner, item, False)

    def room_takers(self):
        return self.lender.room_takers()

    def channel_closed(self) -> None:
        """The channel closes: each owner drops our consumers and requeues what it delivered
        to us and we hold (the settles the channel's close sends after this find nothing
        there: a consumer still there would have taken a requeued message again, counted twice)."""
        owners = set(self.settlers or ()) | {rc.owner for rc in self.consumers.values()}
        self._tell_owners_closed(owners)

    # --- what the owners send (Spread) ------------------------------------------------------------

    def remote_deliver(self, owner: int, item: tuple, arrived: bool = True) -> None:
        """A delivery from the owner of a queue one of our consumers reads; ``arrived`` False:
        one held here before (pending), counted when it came."""
        _, _, consumer_tag, owner_tag, redelivered, exchange, routing_key, properties, body, seq = item
        if body is None:
            body = NO_BODY  # a 0-10 transfer without a body segment
        if arrived and owner_tag is not None:  # a consumer that acks: the channel's prefetch counts it
            self.lender.count_arrival(owner, len(body))
        rc = self.consumers.get(consumer_tag)
        ch = self.channel
        if rc is None:  # cancelled meanwhile: back to the queue
            if owner_tag is not None:
                self._settler(owner).settle_entries([owner_tag], True)
                self.lender.uncount(len(body))
            return
        if rc.pending is not None or not ch.sink.flow_active:  # before consume-ok, or channel.flow off
            if rc.pending is None:
                rc.pending = []
            rc.pending.append(item)
            return
        msg = Message(exchange, routing_key, properties, body)
        if seq is not None:  # a copy the queue keeps (0-10 browsing): acquired later by its number
            ch.sink.browse(rc.credit, seq, msg, redelivered)
            return
        tag = ch.next_tag
        ch.next_tag = tag + 1
        if not rc.no_ack:
            ch.unacked[tag] = (rc.queue, owner_tag, msg, rc, tag)
            rc.unacked += 1
            rc.unacked_bytes += len(body)
        ch.sink.deliver(rc, tag, redelivered, msg)

    def remote_cancelled(self, consumer_tag: str) -> None:
        """The owner's queue went away under one of our consumers: the client is told, after
        the answer to its own delete when this connection is deleting it (as in one process)."""
        if self.consumers.pop(consumer_tag, None) is not None:
            self.channel.cancelled_by_broker(consumer_tag)

    def owner_wants(self, owner: int) -> None:
        self.lender.owner_wants(owner)

    def owner_returns(self, owner: int, room: int) -> None:
        self.lender.owner_returns(owner, room)
