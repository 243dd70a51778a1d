"""A flooding publisher beside a stalled consumer, for flow control through another node
(test_cluster_flow.py, and RabbitMQ's cluster beside Warren's in test_beside_rabbitmq_cluster.py).

The consumer (pika, prefetch 50, its events not processed) stalls the queue; the publisher is a
raw 0-9-1 connection that hands the whole flood to its socket in one call, so it blocks exactly
while the broker does not read it."""

from __future__ import annotations

import threading

import pika

from tests.e2e.rawamqp import RawConnection, publish_frames

PREFETCH = 50


class Flood:
    def __init__(self, consume_url: str, publish_host: str, publish_port: int, queue: str, n: int,
                 size: int = 1024) -> None:
        self.queue, self.n = queue, n
        self.consumer = pika.BlockingConnection(pika.URLParameters(consume_url))
        ch = self.consumer.channel()
        ch.queue_declare(queue)
        ch.basic_qos(prefetch_count=PREFETCH)
        self.got: list[int] = []

        def on_message(channel, method, _props, body) -> None:
            self.got.append(int.from_bytes(body[:8], "big"))
            channel.basic_ack(method.delivery_tag)
        ch.basic_consume(queue, on_message)  # its events are not processed yet: it stalls at PREFETCH
        self.publisher = RawConnection(publish_host, publish_port, timeout=300)
        self.publisher.handshake(heartbeat=0)
        self.publisher.open_channel(1)
        self._frames = b"".join(publish_frames(1, "", queue, i.to_bytes(8, "big") + b"." * (size - 8))
                                for i in range(n))
        self.sent = threading.Event()
        self._thread = threading.Thread(target=self._publish, daemon=True)

    def _publish(self) -> None:
        if self.publisher.try_send(self._frames):  # blocks while the broker does not read the socket
            self.sent.set()

    def start(self) -> "Flood":
        self._thread.start()
        return self

    def drain(self, deadline_s: float = 120.0) -> list[int]:
        """The consumer takes everything (its events processed from now on): what it got, in order."""
        import time
        deadline = time.monotonic() + deadline_s
        while len(self.got) < self.n and time.monotonic() < deadline:
            self.consumer.process_data_events(time_limit=0.2)
        self._thread.join(timeout=30)
        return self.got

    def close(self) -> None:
        for close in (self.publisher.close, self.consumer.close):
            try:
                close()
            except Exception:  # (already closed by the broker or the test)
                pass


def backlog(url: str, queue: str) -> int:
    """The queue's ready messages, by a passive declare."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        return conn.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        conn.close()
