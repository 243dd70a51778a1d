"""A 1.0 link's credit as the broker keeps it (``CreditTerms``, warren/broker/credit.py).

The client grants a receiving link credit (part 2 §2.6.7): how many more transfers it takes,
counted from its delivery count. The protocol core (``connection.py``) keeps the link's credit
and counts it down as transfers go out; what the broker must do is not offer the link a message
it has no credit for, and answer a drain once nothing is left.

* In one process (``LinkCredit``) the keeper reads the core's credit before each delivery.
* When the queue lives in another worker (``--worker-mode queues``), that worker keeps a
  ``CountedLinkCredit``: a limit on how many it may send in all. The session's side
  (``FarLinkCredit``) tells it the limit as *transfers written so far + credit left*, which a
  transfer going out leaves unchanged, so transfers on their way need no correction. A drain asks
  that worker to use the credit on what is there, then answers whether anything is left.
  Transfers that arrive after the client took its credit back (a flow with less) wait on the
  link for the next grant (``Outgoing.overflow``).
"""

from __future__ import annotations

from warren.broker.credit import CreditTerms

__all__ = ["LinkTerms", "LinkCredit", "CountedLinkCredit", "FarLinkCredit", "nothing_left"]


class LinkTerms(CreditTerms):
    """``link``: the ``Outgoing`` link in this process, and ``left()`` its credit in the core;
    None where the terms are made again in another worker (from ``args``: nothing)."""

    KIND = "1.0 link"
    MOVABLE = True  # the core keeps the link's credit: a new keeper is told what is left (``moved``)
    __slots__ = ("link", "left")

    def __init__(self, link=None, left=None) -> None:
        self.link = link
        self.left = left

    @property
    def args(self) -> tuple:
        return ()

    def keep(self, consumer):
        if self.link is None:
            return CountedLinkCredit(consumer)
        return LinkCredit(consumer, self.link, self.left)

    def far(self, link, consumer, queue) -> "FarLinkCredit":
        return FarLinkCredit(link)

    def moved(self, channel, consumer) -> None:
        self.link.consumer = consumer  # the link's flows and drains go to the new keeper
        consumer.credit.granted(self.left(), False)


class LinkCredit:
    """The credit of a link whose queue is in this process: the core's count, read before each
    delivery; a stream link also waits while its filter pauses it."""

    far = False
    __slots__ = ("consumer", "link")

    def __init__(self, consumer, link, left) -> None:
        self.consumer = consumer
        self.link = link
        base = consumer.has_capacity
        if link.stream:
            def has_capacity() -> bool:  # the link's credit, the session's window, a filter's pause, the consumer's own
                return left() > 0 and not link.paused and base()
        else:
            def has_capacity() -> bool:  # the link's credit and the session's window, then the consumer's own
                return left() > 0 and base()
        consumer.has_capacity = has_capacity

    def charge_for(self, msg) -> int:
        return 0  # the core counts its own transfers

    def granted(self, credit: int, drain: bool):
        """The client's flow left the link ``credit``: what it lets through goes now; with
        ``drain``, whether nothing is left for it after that."""
        c = self.consumer
        if self.link.stream:  # the stream's reader reads what the credit lets through, no more
            c.prefetch_count = c.unacked + max(credit, 1)
        c.channel.start_consumer(c)
        return drain and self.nothing_left()

    def drained(self) -> None:
        pass  # the core spent the credit: the check above reads it

    def nothing_left(self) -> bool:
        return nothing_left(self.consumer)


class CountedLinkCredit:
    """Beside a queue another worker's session reads: how many transfers the link may have in
    all (``limit``), against how many were sent."""

    OPS = frozenset({"limit", "drain"})
    __slots__ = ("consumer", "sent", "allowed")

    def __init__(self, consumer) -> None:
        self.consumer = consumer
        self.sent = 0
        self.allowed = 0  # nothing before the session's first grant
        base = consumer.has_capacity

        def has_capacity() -> bool:
            return self.sent < self.allowed and base()
        consumer.has_capacity = has_capacity

    def charge_for(self, msg) -> int:
        self.sent += 1
        return 0

    def limit(self, allowed: int) -> None:
        self.allowed = allowed
        c = self.consumer
        if c.queue.is_stream:  # the stream's reader reads what the credit lets through, no more
            c.prefetch_count = c.unacked + max(allowed - self.sent, 1)

    def drain(self) -> bool:
        """Use the credit on what is there now; whether nothing is left for the link."""
        self.consumer.queue.dispatch()
        return nothing_left(self.consumer)

    def apply(self, op: str, args: tuple):
        if op not in self.OPS:
            raise ValueError(f"not a link credit operation: {op!r}")
        return getattr(self, op)(*args)


class FarLinkCredit:
    """The session's side of a ``CountedLinkCredit`` in another worker."""

    far = True
    __slots__ = ("link", "written")

    def __init__(self, link) -> None:
        self.link = link
        # deliveries that came and were used: written to the client, or (a stream link's filter)
        # settled unseen, which took no credit of the client's
        self.written = 0

    def charge_for(self, msg) -> int:
        self.written += 1
        return 0

    def granted(self, credit: int, drain: bool):
        self.link.tell("limit", self.written + credit)
        return self.link.ask("drain", gone=True) if drain else False

    def drained(self) -> None:
        """The core spent the rest of the credit (a drain ended): none is left over there either."""
        self.link.tell("limit", self.written)

    def nothing_left(self) -> bool:
        return False  # only asked of a stream link paused by its filter, which is never far


def nothing_left(consumer) -> bool:
    """Whether the consumer's queue has nothing for it now (a drain ends): a stream when the
    consumer's reader is past the committed end, another queue when it is empty."""
    queue = consumer.queue
    if queue.is_stream:
        cursor = queue.cursors.get(consumer)
        return cursor is None or cursor > queue.committed
    return queue.message_count == 0
