"""Length limits: a part of the classic queue (``warren/broker/queue.py``).

``x-max-length``/``x-max-length-bytes`` count ready messages (unacked ones do not count):
``drop-head`` drops (dead-letters) the head after the new message was offered to consumers;
``reject-publish(-dlx)`` refuses the new one first: ``publish`` returns ``REFUSED``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warren.broker.dead_letter import MAXLEN
from warren.broker.queues.paging import PAGE_LOW, PAGE_LOW_BYTES

if TYPE_CHECKING:
    from warren.broker.message import Message

__all__ = ["LengthLimits", "REFUSED", "DROP_HEAD", "REJECT_PUBLISH", "REJECT_PUBLISH_DLX", "OVERFLOW_MODES"]

REFUSED = -1  # Queue.publish: a length limit with x-overflow reject-publish(-dlx) refused it
DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX = "drop-head", "reject-publish", "reject-publish-dlx"
OVERFLOW_MODES = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)


class _NoMessage:
    """What ``refuses_publishes`` asks the limits about: a message with an empty body."""

    __slots__ = ()
    body = b""


_NO_MESSAGE = _NoMessage()


class LengthLimits:
    """``Queue``'s length limits (its state is the queue's: ``max_length``,
    ``max_length_bytes``, ``limited``, ``overflow``, ``ready``, ``paged``). ``publish_past_limit``
    and ``refuses_publishes`` override ``QueueBase``'s, which any queue answers without limits."""

    def _would_overflow(self, message: "Message") -> bool:
        if self.max_length is not None and len(self.ready) + self.paged + 1 > self.max_length:
            return True
        return (self.max_length_bytes is not None
                and self.ready_bytes + self.paged_bytes + len(message.body) > self.max_length_bytes)

    def _over_limit(self) -> bool:
        if self.max_length is not None and len(self.ready) + self.paged > self.max_length:
            return True
        return (self.max_length_bytes is not None
                and self.ready_bytes + self.paged_bytes > self.max_length_bytes)

    def _drop_over_limit(self) -> None:
        """x-overflow drop-head: drop (dead-letter) from the head until within the limits."""
        gone = []
        while self._over_limit():
            if self.paged and len(self.ready) < PAGE_LOW and self.ready_bytes < PAGE_LOW_BYTES:
                self.page_in()
            if not self.ready:
                break
            seq, msg, _, _ = self.ready.popleft()
            self.ready_bytes -= len(msg.body)
            self.forget(seq, msg)
            gone.append(msg)
        self._dead_letter(gone, MAXLEN)

    def publish_past_limit(self, message: "Message") -> int:
        """``publish`` of a message another worker routed here and has counted as taken
        (--worker-mode queues, warren/spread/messages.py): a reject-publish limit does not turn
        it away; that worker refuses its publishers while ``refuses_publishes`` says so."""
        if not (self.limited and self.overflow != DROP_HEAD):
            return self.publish(message)
        self.limited = False
        try:
            return self.publish(message)
        finally:
            self.limited = True

    def refuses_publishes(self) -> bool:
        """Whether a reject-publish limit turns the next message away now (an empty one)."""
        return self.limited and self.overflow != DROP_HEAD and self._would_overflow(_NO_MESSAGE)
