"""Flow marks: a collaborator of the classic queue (``warren/broker/queue.py``).

Flow control (docs/performance.md): a queue with consumers whose backlog passes either high mark
is "congested"; the connections that publish to it stop being read until it drains to the low
marks (the server's ``QueueFlow``, which the marks' listener tells). Without this a flat-out
publisher built a backlog of 600k messages (seconds of latency) beside a slower consumer.

The marks trade latency for slack: a congested queue's backlog sits between the low and the high
mark, so its messages wait about mark / consume rate. shared/perf's 1p1c-1KiB-confirm (80k
msg/s) held 2,049 ready messages at a 2 MiB mark (p99 31 ms, RabbitMQ 10 ms), 257 at 256 KiB
(docs/performance.md).

The marks and the listener are the server's, one ``FlowMarks`` for every queue (``Queue.flow``,
set at start from the configuration); each queue keeps its own ``congested`` flag.
"""

from __future__ import annotations

__all__ = ["FlowMarks", "FLOW_HIGH", "FLOW_HIGH_BYTES", "FLOW_LOW_RATIO"]

FLOW_HIGH = 5000  # ready (+ paged) messages
FLOW_HIGH_BYTES = 256 << 10  # octets of ready message bodies in memory
FLOW_LOW_RATIO = 0.5  # drained to half of the high marks: the publishers are read again


class _NoFlowListener:
    """Where a queue reports that it drained when no server holds publishers (tools, tests)."""

    @staticmethod
    def drained(queue) -> None:
        pass


class FlowMarks:
    """The backlog marks of queues with consumers, and who is told when a queue drained."""

    __slots__ = ("high", "high_bytes", "listener")

    def __init__(self, high: int = FLOW_HIGH, high_bytes: int = FLOW_HIGH_BYTES, listener=None) -> None:
        self.high = high  # ready (+ paged) messages
        self.high_bytes = high_bytes  # octets of ready bodies in memory
        # told when a congested queue drained (``drained(queue)``): the server's QueueFlow
        # (warren/server/queue_flow.py), which resumes the publishers it held for that queue
        self.listener = listener if listener is not None else _NoFlowListener()

    def passed(self, count: int, size: int) -> bool:
        """Whether a backlog of ``count`` messages, ``size`` octets in memory, passed a high mark."""
        return count > self.high or size > self.high_bytes

    def drained(self, count: int, size: int) -> bool:
        """Whether such a backlog is down to the low marks (publishers are read again)."""
        return count <= self.high * FLOW_LOW_RATIO and size <= self.high_bytes * FLOW_LOW_RATIO
