"""Set-up and inspection for the Spark write/drain tests, through pika (an independent client).

The tests check what the ``warren`` writer and drain reader did with a client that is not
Warren's own, so a bug shared by both of Warren's sides cannot hide itself.
"""

from __future__ import annotations

import contextlib
import os
import time

import pika

__all__ = ["admin", "message_count", "get_all", "wait_for_count", "NO_DEDUP", "NO_DEDUP_REASON"]

# against another broker (WARREN_TEST_BROKER_URL: RabbitMQ) there is no message deduplication
NO_DEDUP = bool(os.environ.get("WARREN_TEST_BROKER_URL"))
NO_DEDUP_REASON = "deduplication is a LavinMQ feature Warren has; RabbitMQ 3.10 has no plugin for it here"


@contextlib.contextmanager
def admin(broker):
    """A pika channel on the test broker; closes the connection afterwards."""
    conn = pika.BlockingConnection(pika.URLParameters(broker.url + "?socket_timeout=10&blocked_connection_timeout=10"))
    try:
        yield conn.channel()
    finally:
        if conn.is_open:
            conn.close()


def message_count(ch, queue: str) -> int:
    return ch.queue_declare(queue, passive=True).method.message_count


def wait_for_count(ch, queue: str, count: int, timeout: float = 10.0) -> int:
    """The queue's count once it reaches ``count`` (publishes without confirms land a little later)."""
    deadline = time.monotonic() + timeout
    while (n := message_count(ch, queue)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return n


def get_all(ch, queue: str, limit: int) -> list[tuple]:
    """basic.get (auto-ack) until empty or ``limit``: [(method, properties, body)]."""
    out = []
    while len(out) < limit:
        method, props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            break
        out.append((method, props, body))
    return out
