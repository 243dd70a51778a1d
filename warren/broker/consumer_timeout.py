"""RabbitMQ's ``consumer_timeout``: a channel whose oldest unacknowledged delivery is older than
the timeout is closed with 406 PRECONDITION_FAILED and RabbitMQ's text, and its unacked
messages go back to their queues (redelivered, their delivery counts raised).

Nothing is added to the delivery path: no timestamp per delivery. The broker tick calls
``check`` every ``interval`` seconds; for each channel with unacked deliveries it notes a
checkpoint ``(next delivery tag, now)``, which says "every tag below this one was delivered by
now". The oldest unacked tag's delivery time is at most the time of the first checkpoint above
it, so a delivery is timed out between ``timeout`` and ``timeout + interval`` after it was sent,
never before. RabbitMQ's default is 30 minutes (``--consumer-timeout`` in milliseconds, 0 =
off); deliveries to basic.get count too, as in RabbitMQ (its channel looks at every pending ack).
"""

from __future__ import annotations

import logging
from collections import deque

from warren.errors import PreconditionFailed

__all__ = ["ConsumerTimeout", "DEFAULT_CONSUMER_TIMEOUT_MS"]

log = logging.getLogger("warren.consumer_timeout")

DEFAULT_CONSUMER_TIMEOUT_MS = 30 * 60 * 1000  # RabbitMQ's consumer_timeout default
MAX_INTERVAL = 1.0  # seconds between two checks at most (a quarter of a short timeout)


class ConsumerTimeout:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.timeout = timeout_ms / 1000
        self.interval = min(MAX_INTERVAL, self.timeout / 4)
        self.next_check = 0.0
        self._checkpoints: dict = {}  # Channel -> deque of (next tag, time)

    def check(self, sessions, now: float) -> None:
        """Close every channel of ``sessions`` whose oldest unacked delivery timed out."""
        if now < self.next_check:
            return
        self.next_check = now + self.interval
        old, self._checkpoints = self._checkpoints, {}
        for session in list(sessions):
            for ch in list(session.channels.values()):
                unacked = ch.unacked
                if not unacked or ch.closed:
                    continue
                oldest = next(iter(unacked))  # insertion order is tag order
                marks = old.get(ch)
                if marks is None:
                    marks = deque()
                if not marks or marks[-1][0] != ch.next_tag:
                    marks.append((ch.next_tag, now))
                while marks[0][0] <= oldest:  # checkpoints of tags acked since
                    marks.popleft()
                if now - marks[0][1] >= self.timeout:
                    self._time_out(session, ch)
                else:
                    self._checkpoints[ch] = marks

    def _time_out(self, session, ch) -> None:
        text = (f"delivery acknowledgement on channel {ch.number} timed out. Timeout value used: "
                f"{self.timeout_ms} ms. This timeout value can be configured, see consumers doc guide "
                "to learn more")
        log.warning("consumer timeout on connection %s, channel %d: %d unacked deliveries, the oldest "
                    "unacked for more than %d ms", session, ch.number, len(ch.unacked), self.timeout_ms)
        session.fail(PreconditionFailed(text), ch.number)
