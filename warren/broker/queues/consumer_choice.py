"""Which consumer gets the next message: a collaborator of the classic queue (``warren/broker/queue.py``).

``x-single-active-consumer`` delivers to the first consumer registered only, the next one
taking over when it goes; otherwise consumers are kept sorted by ``x-priority`` (highest first)
and a delivery goes to the highest priority with capacity, round-robin within a priority.
``plain`` says that neither applies (one priority, no SAC): the queue's dispatch then goes
round-robin itself, moving ``rr`` (a call per delivery cost 4 % of the queue's instructions with
four consumers), or, with one consumer, asks nobody at all.
"""

from __future__ import annotations

from warren.broker.consumer import Consumer

__all__ = ["ConsumerChoice"]


class ConsumerChoice:
    """The order of a queue's consumers and the round-robin positions in it. ``consumers`` is the
    queue's own list (``QueueBase.consumers``, which everyone reads): only this object reorders it."""

    __slots__ = ("consumers", "single_active", "plain", "rr", "priority_rr")

    def __init__(self, consumers: list[Consumer], single_active: bool) -> None:
        self.consumers = consumers
        self.single_active = single_active
        self.plain = not single_active  # no SAC and every consumer of the same priority
        self.rr = 0  # round-robin position in consumers (plain; the queue's dispatch moves it)
        self.priority_rr: dict[int, int] = {}  # x-priority -> round-robin position in its group

    def add(self, consumer: Consumer) -> None:
        consumers = self.consumers
        if self.single_active or not consumers or consumer.priority <= consumers[-1].priority:
            consumers.append(consumer)  # SAC: registration order decides who is next
        else:  # after the consumers of its priority and above (highest first)
            i = next(i for i, c in enumerate(consumers) if c.priority < consumer.priority)
            consumers.insert(i, consumer)
            if i <= self.rr:
                self.rr += 1
        self.plain = not self.single_active and consumers[0].priority == consumers[-1].priority

    def remove(self, consumer: Consumer) -> bool:
        """Whether ``consumer`` was one of them (now gone)."""
        consumers = self.consumers
        try:
            i = consumers.index(consumer)
        except ValueError:
            return False
        del consumers[i]
        if i < self.rr:
            self.rr -= 1
        self.plain = not self.single_active and (not consumers or consumers[0].priority == consumers[-1].priority)
        return True

    def pick(self) -> Consumer | None:
        """The consumer for the next delivery when SAC or consumer priorities apply."""
        consumers = self.consumers
        if self.single_active:
            c = consumers[0]
            return c if c.has_capacity() else None
        n = len(consumers)
        i = 0
        while i < n:  # groups of equal priority, highest first; round-robin inside a group
            p = consumers[i].priority
            j = i + 1
            while j < n and consumers[j].priority == p:
                j += 1
            size = j - i
            start = self.priority_rr.get(p, 0)
            for step in range(size):
                k = (start + step) % size
                c = consumers[i + k]
                if c.has_capacity():
                    self.priority_rr[p] = (k + 1) % size
                    return c
            i = j
        return None

    def turns(self) -> list[Consumer]:
        """Every consumer in the order it is offered the next message (a queue that may have to
        skip some, Qpid's message groups): the one active consumer, else round-robin, higher
        x-priority first."""
        consumers = self.consumers
        if self.single_active:
            return consumers[:1]
        start = self.rr % len(consumers)
        order = consumers[start:] + consumers[:start]
        if not self.plain:
            order.sort(key=lambda c: -c.priority)  # stable: round-robin within a priority
        return order

    def took(self, consumer: Consumer) -> None:
        """``consumer``, offered a turn (``turns``), took a message: the turn passes it."""
        self.rr = (self.consumers.index(consumer) + 1) % len(self.consumers)

    def can_deliver_now(self) -> bool:
        """Whether a message published now would go straight to a consumer (TTL 0)."""
        consumers = self.consumers
        if not consumers:
            return False
        if self.single_active:
            return consumers[0].has_capacity()
        return any(c.has_capacity() for c in consumers)
