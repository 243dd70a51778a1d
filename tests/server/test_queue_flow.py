"""The server's QueueFlow (warren/server/queue_flow.py): which connections congested queues
hold, and who is resumed when a queue drains. The socket side (reading stops, TCP pushes back,
the pause times out) is tested with real clients in tests/e2e/test_flow.py."""

from __future__ import annotations

from warren.broker.queue import Queue
from warren.broker.queues.flow_marks import FlowMarks
from warren.broker.vhost import VirtualHost
from warren.server.queue_flow import QueueFlow


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.released = 0

    def flow_released(self) -> None:
        self.released += 1


def test_a_connection_is_resumed_once_every_queue_it_waits_for_drained():
    flow = QueueFlow()
    a, q1, q2 = Conn("a"), object(), object()
    assert flow.hold(a, q1) is True  # the first queue: the glue stops reading
    assert flow.hold(a, q1) is False
    assert flow.hold(a, q2) is False  # held already
    flow.drained(q1)
    assert a.released == 0 and flow.held(a)
    flow.drained(q2)
    assert a.released == 1 and not flow.held(a) and len(flow) == 0


def test_a_drained_queue_resumes_every_connection_it_held():
    flow = QueueFlow()
    a, b, q = Conn("a"), Conn("b"), object()
    flow.hold(a, q)
    flow.hold(b, q)
    flow.drained(q)
    flow.drained(q)  # a second report changes nothing
    assert (a.released, b.released) == (1, 1)


def test_release_forgets_the_connection_everywhere():
    flow = QueueFlow()
    a, b, q = Conn("a"), Conn("b"), object()
    flow.hold(a, q)
    flow.hold(b, q)
    flow.release(a)  # its pause timed out, or it closed
    assert not flow.held(a)
    flow.drained(q)
    assert (a.released, b.released) == (0, 1)
    assert flow.hold(a, q) is True  # its next publish to the queue holds it again


def test_a_queue_tells_its_flow_listener_when_it_stops_being_congested():
    flow = QueueFlow()
    a = Conn("a")
    q = Queue(VirtualHost("/"), "q")
    q.flow = FlowMarks(listener=flow)  # this queue's marks only (the server sets Queue.flow for all)
    q.congested = True
    flow.hold(a, q)
    q.release_flow()
    assert not q.congested and a.released == 1 and len(flow) == 0
