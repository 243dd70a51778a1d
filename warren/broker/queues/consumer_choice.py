"""Which consumer gets the next message: a part of the classic queue (``warren/broker/queue.py``).

``x-single-active-consumer`` delivers to the first consumer registered only, the next one
taking over when it goes; otherwise consumers are kept sorted by ``x-priority`` (highest first)
and a delivery goes to the highest priority with capacity, round-robin within a priority.
``_plain`` says that neither applies (one priority, no SAC): ``Queue.dispatch`` then goes
round-robin itself, without ``_pick``.
"""

from __future__ import annotations

import time

from warren.broker.consumer import Consumer

__all__ = ["ConsumerChoice"]


class ConsumerChoice:
    """``Queue``'s consumers, in the order deliveries go to them (its state is the queue's:
    ``consumers``, ``single_active``, ``_plain``, ``_rr``, ``_priority_rr``)."""

    def add_consumer(self, consumer: Consumer) -> None:
        consumers = self.consumers
        if self.single_active or not consumers or consumer.priority <= consumers[-1].priority:
            consumers.append(consumer)  # SAC: registration order decides who is next
        else:  # after the consumers of its priority and above (highest first)
            i = next(i for i, c in enumerate(consumers) if c.priority < consumer.priority)
            consumers.insert(i, consumer)
            if i <= self._rr:
                self._rr += 1
        self._plain = not self.single_active and consumers[0].priority == consumers[-1].priority
        self.had_consumer = True

    def remove_consumer(self, consumer: Consumer) -> None:
        try:
            i = self.consumers.index(consumer)
        except ValueError:
            return
        del self.consumers[i]
        if i < self._rr:
            self._rr -= 1
        consumers = self.consumers
        self._plain = not self.single_active and (not consumers or consumers[0].priority == consumers[-1].priority)
        if not consumers:
            self.last_used = time.monotonic()  # x-expires counts from the last consumer's going
            if self.congested:
                self.release_flow()  # nobody drains it now: paging bounds its memory instead
        if self.auto_delete and not consumers and self.had_consumer:
            self.vhost.delete_queue(self)
        elif consumers and self.ready:
            self.dispatch()  # the next active consumer (SAC) or a lower priority may take over

    def _pick(self) -> Consumer | None:
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
            start = self._priority_rr.get(p, 0)
            for step in range(size):
                k = (start + step) % size
                c = consumers[i + k]
                if c.has_capacity():
                    self._priority_rr[p] = (k + 1) % size
                    return c
            i = j
        return None

    def _can_deliver_now(self) -> bool:
        """Whether a message published now would go straight to a consumer (TTL 0)."""
        if not self.consumers:
            return False
        if self.single_active:
            return self.consumers[0].has_capacity()
        return any(c.has_capacity() for c in self.consumers)
