"""Message TTL and queue expiry: a part of the classic queue (``warren/broker/queue.py``).

A message's deadline is the monotonic time it expires: the lower of the queue's
``x-message-ttl`` and the message's ``expiration`` property, set as it is enqueued (``publish``)
or read back (``page_in``, ``restore``). As in RabbitMQ, expired messages are dropped when they
reach the head of the queue; besides that check on every take, a queue holding messages with a
deadline (or declared with ``x-expires``) sits in ``vhost.timers`` and ``tick`` expires its head
as time passes, as RabbitMQ's timer does. A TTL of 0 expires a message at once unless a consumer
can take it now. A taken message keeps its deadline (``_taken``) and takes it back on requeue.

``x-expires``: ``tick`` deletes the queue once unused that long (no consumer, no basic.get, no
declare); ``last_used`` is when it was last used. What every queue type has of this (``last_used``,
``touch``, and ``_timed``, which asks for ``tick`` calls) is in ``base.py``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from warren.broker.dead_letter import EXPIRED
from warren.broker.message import EXPIRATION_HI

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["Expiry"]



class Expiry:
    """``Queue``'s expiry of messages and of the queue itself (its state is the queue's:
    ``ready``, ``message_ttl``, ``expires``, ``last_used``, ``_ticking``; ``_timed`` and
    ``touch`` are ``QueueBase``'s)."""

    def expire(self) -> None:
        """Drop (dead-letter) expired messages from the head of the queue."""
        ready = self.ready
        if ready and ready[0][3]:
            now = time.monotonic()
            gone = []
            while ready and ready[0][3] and ready[0][3] <= now:
                gone.append(ready.popleft())
            self._expired(gone)

    def _expired(self, entries) -> None:
        """Entries taken off the ready messages because they expired: forget, dead-letter."""
        if not entries:
            return
        for seq, msg, _, _ in entries:
            self.ready_bytes -= len(msg.body)
            self.forget(seq, msg)
        self._dead_letter([e[1] for e in entries], EXPIRED)

    def tick(self, now: float) -> bool:
        """Expire the head and, with x-expires, delete the queue when unused for that long.
        Returns whether to keep ticking."""
        if self.deleted or self.vhost.queues.get(self.name) is not self:
            self._ticking = False
            return False
        if self.expires is not None and not self.consumers and now - self.last_used >= self.expires:
            self._ticking = False
            self.vhost.delete_queue(self)
            return False
        self.expire()
        if self.congested:
            self._check_drained()
        self._ticking = self.expires is not None or bool(self.ready) or bool(self.paged)
        return self._ticking

    def _ttl_of(self, message: "Message") -> float | None:
        """The TTL of a message read back from disk: the lower of queue and message TTL."""
        props = message.properties
        if len(props) >= 2 and props[0] & EXPIRATION_HI:  # decode only then
            try:
                message.check_expiration()
            except Exception:
                pass  # it was valid when published; keep the message rather than lose it
        ttl = self.message_ttl
        if message.ttl is not None and (ttl is None or message.ttl < ttl):
            ttl = message.ttl
        return ttl
