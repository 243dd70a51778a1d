"""Flow control for congested queues: which connections a queue's backlog holds back.

A queue with consumers whose backlog passes its flow mark is *congested* (``Queue.congested``,
``warren/broker/queues/flow_marks.py``). A connection that publishes to it is held: the glue stops reading
from it (``AMQPConnection.throttle``), so TCP pushes back on the publisher, until the queue
drains to its low mark. The broker never holds a connection: a queue only tells the one
``QueueFlow`` of the server that it drained (``drained``, the listener of the queues' ``FlowMarks``), and
this object, which keeps both directions (queue -> connections it holds, connection -> queues
it waits for), resumes every connection that waited for nothing else
(``AMQPConnection.flow_released``).

A held connection is read again after ``FLOW_MAX_PAUSE_S`` anyway (``connection.py``), which
``release`` records here; it is held again by its next publish to a still congested queue.
"""

from __future__ import annotations

__all__ = ["QueueFlow"]


class QueueFlow:
    def __init__(self) -> None:
        self._by_queue: dict = {}  # congested queue -> the connections it holds back
        self._by_conn: dict = {}  # held connection -> the congested queues it waits for

    def hold(self, conn, queue) -> bool:
        """``conn`` published to the congested ``queue``: it waits for the queue to drain.
        True when the connection was not held before (the glue then stops reading it)."""
        queues = self._by_conn.get(conn)
        first = queues is None
        if first:
            queues = self._by_conn[conn] = set()
        elif queue in queues:
            return False
        queues.add(queue)
        held = self._by_queue.get(queue)
        if held is None:
            held = self._by_queue[queue] = set()
        held.add(conn)
        return first

    def drained(self, queue) -> None:
        """The queue's backlog is below its low mark, or it lost its consumers (called by the
        queue): each connection that waited for nothing else is resumed."""
        held = self._by_queue.pop(queue, None)
        if not held:
            return
        for conn in held:
            queues = self._by_conn.get(conn)
            if queues is None:
                continue
            queues.discard(queue)
            if not queues:
                del self._by_conn[conn]
                conn.flow_released()

    def release(self, conn) -> None:
        """The connection stops waiting (its pause timed out, it closes or is gone)."""
        for queue in self._by_conn.pop(conn, ()):
            held = self._by_queue.get(queue)
            if held is not None:
                held.discard(conn)
                if not held:
                    del self._by_queue[queue]

    def held(self, conn) -> bool:
        return conn in self._by_conn

    def __len__(self) -> int:
        """How many connections are held now."""
        return len(self._by_conn)
