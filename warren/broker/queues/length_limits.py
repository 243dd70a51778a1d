"""Length limits: a collaborator of the classic queue (``warren/broker/queue.py``).

``x-max-length``/``x-max-length-bytes`` count ready messages (unacked ones do not count):
``drop-head`` drops (dead-letters) the head after the new message was offered to consumers
(the queue's ``_drop_over_limit``); ``reject-publish(-dlx)`` refuses the new one first:
``publish`` returns ``REFUSED``. The queue's ``limited`` flag says whether either limit is set.
"""

from __future__ import annotations

__all__ = ["LengthLimit", "REFUSED", "DROP_HEAD", "REJECT_PUBLISH", "REJECT_PUBLISH_DLX", "OVERFLOW_MODES"]

REFUSED = -1  # Queue.publish: a length limit with x-overflow reject-publish(-dlx) refused it
DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX = "drop-head", "reject-publish", "reject-publish-dlx"
OVERFLOW_MODES = (DROP_HEAD, REJECT_PUBLISH, REJECT_PUBLISH_DLX)


class LengthLimit:
    """A queue's limits on its ready messages (count, body octets) and what happens past them."""

    __slots__ = ("max_length", "max_length_bytes", "overflow", "rejects")

    def __init__(self, max_length: int | None, max_length_bytes: int | None, overflow: str = DROP_HEAD) -> None:
        self.max_length = max_length
        self.max_length_bytes = max_length_bytes
        self.overflow = overflow
        self.rejects = overflow != DROP_HEAD  # reject-publish(-dlx): the new message is refused

    def over(self, count: int, size: int) -> bool:
        """Whether ``count`` ready messages of ``size`` body octets exceed a limit."""
        if self.max_length is not None and count > self.max_length:
            return True
        return self.max_length_bytes is not None and size > self.max_length_bytes

    def within(self, count: int, size: int, ratio: float) -> bool:
        """Whether ``count`` messages of ``size`` octets are at most ``ratio`` of every limit."""
        return ((self.max_length is None or count <= int(self.max_length * ratio))
                and (self.max_length_bytes is None or size <= int(self.max_length_bytes * ratio)))
