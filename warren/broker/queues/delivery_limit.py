"""What a taken message needs if it comes back, and ``x-delivery-limit`` (quorum-queue semantics
on any queue): a collaborator of the classic queue (``warren/broker/queue.py``).

A message taken by a consumer with a TTL or a delivery limit is remembered as it was queued,
with its deadline (``by_seq``), for a requeue or a reject: the delivery may have carried an
``x-delivery-count`` header the queued message has not. ``returns`` counts how often each message
came back; every delivery carries ``x-delivery-count`` (0 the first time); a return past the limit
dies (``returning``), which the queue dead-letters (``delivery_limit``). In memory only: the
counts start again from 0 after a restart (the quorum queue keeps them in its store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warren.broker.dead_letter import with_header
from warren.spec.fields import Long

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["TakenMessages"]


class TakenMessages:
    """A queue's taken messages that may come back, and their delivery counts."""

    __slots__ = ("limit", "by_seq", "returns")

    def __init__(self) -> None:
        self.limit: int | None = None  # x-delivery-limit (the queue sets it from its arguments)
        self.by_seq: dict[int, tuple] = {}  # seq -> (message as queued, deadline)
        self.returns: dict[int, int] = {}  # seq -> times returned (with a limit only)

    def taking(self, seq: int, msg: "Message", deadline: float, no_ack: bool, get: bool = False) -> "Message":
        """A message with a deadline or a delivery limit leaves for a consumer: remember what a
        requeue needs, and with a delivery limit give it its x-delivery-count header (as RabbitMQ
        3.10's quorum queues: from the first return on, and on every basic.get, 0 included).
        Returns the message to send."""
        if not no_ack:
            self.by_seq[seq] = (msg, deadline)
        if self.limit is None:
            return msg
        count = self.returns.pop(seq, 0) if no_ack else self.returns.get(seq, 0)
        if not count and not get:
            return msg
        try:
            return with_header(msg, "x-delivery-count", Long(count))
        except Exception:  # a property list we cannot rewrite goes out as it came
            return msg

    def as_queued(self, seq: int, message: "Message") -> "Message":
        """A taken message rejected for good: the message as queued (without the
        x-delivery-count of its delivery), which dead-lettering takes."""
        info = self.by_seq.get(seq) if self.by_seq else None
        return message if info is None else info[0]

    def settled(self, seq: int) -> None:
        """Message ``seq`` left the queue for good."""
        if self.by_seq:
            self.by_seq.pop(seq, None)
        if self.returns:
            self.returns.pop(seq, None)

    def returning(self, seq: int, msg: "Message") -> tuple["Message", float, bool]:
        """Message ``seq`` comes back (a requeue): (the message as queued, its deadline or 0,
        whether it is past the delivery limit and dies instead)."""
        deadline = 0
        if self.by_seq:
            info = self.by_seq.pop(seq, None)
            if info is not None:
                msg, deadline = info
        limit = self.limit
        if limit is None:
            return msg, deadline, False
        n = self.returns.get(seq, 0) + 1
        if n > limit:
            return msg, deadline, True
        self.returns[seq] = n
        return msg, deadline, False

    def edit(self, seq: int, change) -> bool:
        """Message ``seq``, if remembered, becomes ``change(message as queued)`` for its return
        or its rejection (a 1.0 ``modified`` outcome's annotations). Whether it was remembered."""
        info = self.by_seq.get(seq)
        if info is None:
            return False
        self.by_seq[seq] = (change(info[0]), info[1])
        return True

    def recovered(self, seq: int, count: int) -> None:
        """A message read back from a store after a restart had returned ``count`` times."""
        self.returns[seq] = count
