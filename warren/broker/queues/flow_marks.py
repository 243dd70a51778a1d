"""Flow marks: a part of the classic queue (``warren/broker/queue.py``).

Flow control (docs/performance.md): a queue with consumers whose backlog passes either high mark
is "congested"; the connections that publish to it stop being read until it drains to the low
marks (the server's ``QueueFlow``, which the queue tells: ``flow_listener``). Without this a
flat-out publisher built a backlog of 600k messages (seconds of latency) beside a slower
consumer.

The marks trade latency for slack: a congested queue's backlog sits between the low and the high
mark, so its messages wait about mark / consume rate. shared/perf's 1p1c-1KiB-confirm (80k
msg/s) held 2,049 ready messages at a 2 MiB mark (p99 31 ms, RabbitMQ 10 ms), 257 at 256 KiB
(docs/performance.md).
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
    """``Queue``'s congestion (its state is the queue's: ``congested``, ``ready``, ``paged``)."""

    flow_high = FLOW_HIGH  # class attributes: the server may set other marks (Config)
    flow_high_bytes = FLOW_HIGH_BYTES
    # told when a congested queue drained (``drained(queue)``): the server's QueueFlow
    # (warren/server/queue_flow.py), which resumes the publishers it held for this queue
    flow_listener = _NoFlowListener()

    def _check_congestion(self) -> None:
        """Publishers outrun the consumers: mark the queue congested (the channel then pauses
        the connection that published, ``BrokerConnection.throttled_by``)."""
        if (len(self.ready) + self.paged > self.flow_high or self.ready_bytes > self.flow_high_bytes) \
                and self.consumers:
            self.congested = True

    def _check_drained(self) -> None:
        """Called where the backlog shrinks: below the low marks, read the publishers again."""
        if (not self.consumers or self.deleted
                or (len(self.ready) + self.paged <= self.flow_high * FLOW_LOW_RATIO
                    and self.ready_bytes <= self.flow_high_bytes * FLOW_LOW_RATIO)):
            self.release_flow()

    def release_flow(self) -> None:
        """No longer congested: the publishers held for this queue are resumed."""
        self.congested = False
        self.flow_listener.drained(self)
