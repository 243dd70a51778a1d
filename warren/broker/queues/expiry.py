"""Message TTL and queue expiry: a collaborator of the classic queue (``warren/broker/queue.py``).

A message's deadline is the monotonic time it expires: the lower of the queue's
``x-message-ttl`` and the message's ``expiration`` property, set as it is enqueued (``publish``)
or read back (``page_in``, ``restore``). As in RabbitMQ, expired messages are dropped when they
reach the head of the queue (the queue's ``expire``); besides that check on every take, a queue
holding messages with a deadline (or declared with ``x-expires``) sits in ``vhost.timers`` and
its ``tick`` expires its head as time passes, as RabbitMQ's timer does. A TTL of 0 expires a
message at once unless a consumer can take it now. A taken message keeps its deadline
(``delivery_limit.py``'s ``TakenMessages``) and takes it back on requeue.

``x-expires``: ``tick`` deletes the queue once unused that long (no consumer, no basic.get, no
declare); ``last_used`` is when it was last used. What every queue type has of this (``last_used``,
``touch``, and ``ask_for_ticks``, which asks for ``tick`` calls) is in ``base.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warren.broker.message import EXPIRATION_HI

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["Expiry"]


class Expiry:
    """A queue's ``x-message-ttl`` and ``x-expires``, and the TTL each message gets from them."""

    __slots__ = ("message_ttl", "expires")

    def __init__(self, message_ttl: float | None = None, expires: float | None = None) -> None:
        # seconds; applies to messages enqueued from now on (those queued keep their deadline, as RabbitMQ)
        self.message_ttl = message_ttl
        self.expires = expires  # seconds unused after which the queue is deleted, or None

    def ttl_of(self, message: "Message") -> float | None:
        """The TTL a message gets here: the lower of the queue's and its own, or None."""
        ttl = self.message_ttl
        msg_ttl = message.ttl
        if msg_ttl is not None and (ttl is None or msg_ttl < ttl):
            return msg_ttl
        return ttl

    def ttl_of_stored(self, message: "Message") -> float | None:
        """``ttl_of`` for a message read back from disk, whose expiration is not decoded yet."""
        props = message.properties
        if len(props) >= 2 and props[0] & EXPIRATION_HI:  # decode only then
            try:
                message.check_expiration()
            except Exception:
                pass  # it was valid when published; keep the message rather than lose it
        return self.ttl_of(message)

    def unused_too_long(self, last_used: float, now: float) -> bool:
        """x-expires: whether a queue unused since ``last_used`` is to be deleted at ``now``."""
        return self.expires is not None and now - last_used >= self.expires
