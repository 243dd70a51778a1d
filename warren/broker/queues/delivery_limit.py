"""``x-delivery-limit`` (quorum-queue semantics on any queue): a part of the classic queue
(``warren/broker/queue.py``).

``_returns`` counts how often each message came back; every delivery carries
``x-delivery-count`` (0 the first time); a return past the limit dead-letters it
(``delivery_limit``) or drops it (``Queue.requeue``). In memory only: the counts start again
from 0 after a restart. Messages taken with a TTL or a delivery limit are remembered in
``_taken`` as queued, with their deadline, for a requeue or a reject.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warren.broker.dead_letter import REJECTED, with_header
from warren.spec.fields import Long

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["DeliveryLimit"]


class DeliveryLimit:
    """``Queue``'s delivery count and what taken messages need to come back (its state is the
    queue's: ``delivery_limit``, ``_returns``, ``_taken``)."""

    def _taking(self, seq: int, msg: "Message", deadline: float, no_ack: bool, get: bool = False) -> "Message":
        """A message with a deadline or a delivery limit leaves for a consumer: remember what a
        requeue needs, and with a delivery limit give it its x-delivery-count header (as RabbitMQ
        3.10's quorum queues: from the first return on, and on every basic.get, 0 included)."""
        if not no_ack:
            self._taken[seq] = (msg, deadline)
        if self.delivery_limit is None:
            return msg
        count = self._returns.pop(seq, 0) if no_ack else self._returns.get(seq, 0)
        if not count and not get:
            return msg
        try:
            return with_header(msg, "x-delivery-count", Long(count))
        except Exception:  # a property list we cannot rewrite goes out as it came
            return msg

    def reject(self, seq: int, message: "Message") -> None:
        """A taken message was rejected or nacked without requeue: gone, and dead-lettered."""
        info = self._taken.get(seq) if self._taken else None
        if info is not None:
            message = info[0]  # as queued, without the x-delivery-count of its delivery
        self.forget(seq, message)
        self._dead_letter((message,), REJECTED)
