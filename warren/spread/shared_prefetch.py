"""A channel's shared prefetch (``basic.qos`` global) over queues that live on several workers.

RabbitMQ's global prefetch limits the unacknowledged deliveries of all a channel's consumers
together. Under ``--worker-mode queues`` those consumers may read queues other workers own, each
of which hands out deliveries on its own (``proxy.py``), so the count lives with the channel, on
the consuming worker, and the owners borrow from it:

* **The lender** (the consuming worker's channel, through its ``RemoteReads``) counts in ``consumer_unacked`` its
  own consumers' deliveries, the deliveries that came from owners and are not settled yet, and
  the room it lent and has not seen used or given back (``lent``). Its own queues check that
  count as in one process, so they never take room an owner holds.
* **A borrower** (the owner's ``ProxyChannel``) delivers only within the room lent to it: its
  ``consumer_unacked`` reads ``prefetch_count - room`` and its consumers' checks are unchanged.
  A consumer blocked by that count alone says so (``want``, once until room comes); room it
  was lent and could not use at once (its queue had less) goes straight back (``return``), so
  no owner sits on room another queue of the channel could use. A settle frees nothing there:
  the room goes back to the lender, which settles it.
* Room that frees (an ack, a reject, a requeue, room given back, a larger qos) is offered in
  turn to the channel's own queues and to the owners that asked (``BrokerChannel.share_room``),
  so one busy queue does not take every freed slot.

Messages on the link keep their order (``Spread.tell`` sends what was batched first), so the
lender sees an owner's deliveries made under lent room before that owner's ``return``. The
octet limit (``prefetch_size`` with global) is not lent: each owner counts its own octets,
the consuming worker all of them (docs/compatibility.md).
"""

from __future__ import annotations

__all__ = ["Lender", "Borrower"]


class _OwnerTurn:
    """An owner that asked for room, as one more taker in ``share_room``'s rotation."""

    __slots__ = ("lender", "owner")

    def __init__(self, lender, owner: int) -> None:
        self.lender = lender
        self.owner = owner

    def __hash__(self) -> int:
        return hash(self.owner)

    def __eq__(self, other) -> bool:
        return isinstance(other, _OwnerTurn) and other.owner == self.owner and other.lender is self.lender

    def dispatch(self) -> None:
        self.lender.lend(self.owner)


class Lender:
    """The consuming worker's side: the shared count of one channel (``RemoteReads`` holds it)."""

    def __init__(self, spread, channel) -> None:
        self.spread = spread
        self.channel = channel
        self.lent: dict[int, int] = {}  # owner -> room lent and not yet seen used or given back
        self.wanting: set[int] = set()  # owners whose consumers wait for room

    def room_takers(self):
        return [_OwnerTurn(self, owner) for owner in sorted(self.wanting)] if self.wanting else ()

    def lend(self, owner: int) -> None:
        """All the free shared room to ``owner``, if it still asks (``_OwnerTurn.dispatch``)."""
        ch = self.channel
        wanting = self.wanting
        room = ch.prefetch_count - ch.consumer_unacked
        if owner not in wanting or room <= 0 or ch.closed:
            return
        wanting.discard(owner)
        self.lent[owner] = self.lent.get(owner, 0) + room
        ch.consumer_unacked += room
        self.spread.tell(owner, "grant", id(ch.session), ch.number, room)

    def owner_wants(self, owner: int) -> None:
        """An owner's consumer of this channel waits for room (the owner's ``want``)."""
        ch = self.channel
        if ch.closed:
            return
        self.wanting.add(owner)
        if ch.prefetch_count and ch.consumer_unacked < ch.prefetch_count:
            ch.share_room()

    def owner_returns(self, owner: int, room: int) -> None:
        """Room lent to ``owner`` that it did not use (the owner's ``return``)."""
        lent = self.lent.get(owner, 0)
        room = min(room, lent)
        if room <= 0:
            return
        ch = self.channel
        self.lent[owner] = lent - room
        ch.consumer_unacked -= room
        if not ch.closed:
            ch.share_room()

    def count_arrival(self, owner: int, size: int) -> None:
        """A counted delivery from ``owner`` arrived: it used room lent to the owner (else it was
        made outside the shared count, and counts from now)."""
        ch = self.channel
        lent = self.lent
        if lent.get(owner):
            lent[owner] -= 1
        else:
            ch.consumer_unacked += 1
        ch.consumer_unacked_bytes += size

    def uncount(self, size: int) -> None:
        """A counted delivery that never reached the client (its consumer went): its room back."""
        ch = self.channel
        ch.consumer_unacked -= 1
        ch.consumer_unacked_bytes -= size
        if ch.prefetch_count or ch.prefetch_size:
            ch.share_room()

    def prefetch_changed(self) -> None:
        """basic.qos on the channel: a larger count gives the owners that asked their turn."""
        ch = self.channel
        if self.wanting and ch.prefetch_count:
            ch.share_room()


class Borrower:
    """The owner's side (a mixin of ``ProxyChannel``): ``shared`` while the consuming channel
    has a shared prefetch count, and then ``prefetch_count - consumer_unacked`` is the room lent."""

    shared = False
    asked = False  # a want was sent and no room came since
    grant_turn = 0  # grant: which queue goes first next time

    def set_limits(self, consumer_count: int, consumer_size: int, channel_count: int, channel_size: int) -> None:
        """The consuming channel's prefetch (at a consume, and at each basic.qos there; the
        caller offers the new room to the queues)."""
        self.consumer_prefetch_count, self.consumer_prefetch_size = consumer_count, consumer_size
        self.prefetch_size = channel_size
        if channel_count:
            room = self.prefetch_count - self.consumer_unacked if self.shared else 0
            if not self.shared:
                self.shared = True
                for c in self.consumers.values():
                    self._borrowing(c)
            self.prefetch_count = channel_count
            self.consumer_unacked = channel_count - room
        else:
            if self.shared:
                self._give_back()
                self.shared = False
                self.asked = False
                for c in self.consumers.values():
                    if c.counted_capacity is not None and c.credit is None:
                        c.has_capacity = c.counted_capacity
            self.prefetch_count = 0
            self.consumer_unacked = sum(1 for entry in self.unacked.values() if entry[3] is not None)

    def consume(self, queue: str, tag: str, no_ack: bool, exclusive: bool, arguments: dict, credit=None):
        c = super().consume(queue, tag, no_ack, exclusive, arguments, credit)
        if self.shared:
            self._borrowing(c)
        return c

    def _borrowing(self, consumer) -> None:
        if consumer.counted_capacity is None or consumer.credit is not None:
            return  # no-ack: the prefetch never counts it; credit: its keeper gates it
        counted = consumer.counted_capacity

        def has_capacity() -> bool:
            if counted():
                return True
            if not self.asked and self.shared and self._blocked_by_room(consumer):
                self.asked = True
                sink = self.sink
                sink.spread.tell(sink.worker, "want", sink.session_id, sink.number)
            return False
        consumer.has_capacity = has_capacity

    def _blocked_by_room(self, c) -> bool:
        """Whether only the lent room stops a delivery to ``c`` (not its own prefetch, the octet
        limit or the link's window): it would take one with one more slot. Asked of the
        consumer's own check (``Consumer._capacity_acked``), so the two cannot drift apart."""
        if self.closed or self.consumer_unacked < self.prefetch_count:
            return False
        self.consumer_unacked -= 1  # one slot more, for the question only
        try:
            return c.counted_capacity()
        finally:
            self.consumer_unacked += 1

    def grant(self, room: int) -> None:
        """Room lent by the consuming worker: deliver within it, give back what is left."""
        if not self.shared or self.closed:
            sink = self.sink
            sink.spread.tell(sink.worker, "return", sink.session_id, sink.number, room)
            return
        self.asked = False
        self.consumer_unacked -= room
        # the queues take turns at it (the first to dispatch takes what it can use): a turn of
        # its own, since share_room's also turns at each settle, two steps per lent slot
        sources = list(dict.fromkeys(c.queue for c in self.consumers.values()))
        if sources:
            start = self.grant_turn % len(sources)
            self.grant_turn += 1
            for q in sources[start:] + sources[:start]:
                q.dispatch()
        self._give_back()

    def _give_back(self) -> None:
        room = self.prefetch_count - self.consumer_unacked
        if room > 0:
            self.consumer_unacked += room
            sink = self.sink
            sink.spread.tell(sink.worker, "return", sink.session_id, sink.number, room)

    def settle_entries(self, entries: list, requeue) -> None:
        if self.shared:  # the room goes back to the lender, who settles it there
            self.consumer_unacked += sum(1 for entry in entries if entry[3] is not None)
        super().settle_entries(entries, requeue)
