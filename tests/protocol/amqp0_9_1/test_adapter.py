"""The 0-9-1 connection handler (warren/protocol/amqp0_9_1/adapter.py) between a real sans-IO
``ServerConnection`` and a real ``Broker``, fed client frames as bytes: when it takes runs of
publishes (``Config.publish_runs``), the class and method ids its error path gives a refusal,
and what an idle connection does not hold. What a real client sees over a socket:
tests/e2e/test_publish_runs.py (runs) and tests/e2e/test_errors.py (refusals)."""

from __future__ import annotations

import struct

import pytest

from warren.access.login import MECHANISMS
from warren.broker.broker import Broker
from warren.broker.durability import Durability
from warren.codec.frames import FRAME_BODY, FRAME_HEADER, FRAME_METHOD, FrameBuffer, header_payload, method_frame
from warren.protocol.amqp0_9_1.adapter import ConnectionHandler
from warren.protocol.amqp0_9_1.connection import PUBLISH_RUN_MAX, ServerConnection
from warren.protocol.events import Acks, Content, Publishes
from warren.spec import amqp0_9_1 as spec


class GlueCalls:
    """The asyncio glue's side of the handler (warren/server/connection.py), without a socket:
    what the handler asks of it is counted, nothing is written anywhere."""

    certificate_login = None
    placing = False  # it may not move to another worker (warren/server/placement.py)

    def __init__(self) -> None:
        self.opened_count = 0
        self.closing = False

    def want_flush(self) -> None:
        pass

    def start_heartbeat(self, seconds: int) -> None:
        pass

    def opened(self) -> None:
        self.opened_count += 1

    def close_soon(self) -> None:
        self.closing = True

    def close_after_flush(self) -> None:
        self.closing = True

    def throttle(self, queue) -> None:
        pass


def frame(ftype: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def publish(routing_key: str, body: bytes) -> bytes:
    return (method_frame(1, spec.BasicPublish(exchange="", routing_key=routing_key).encode())
            + frame(FRAME_HEADER, 1, header_payload(60, len(body), b"\x00\x00")) + frame(FRAME_BODY, 1, body))


class Client:
    """One connection of the handler: bytes in, every event recorded by type, then handled."""

    def __init__(self, tmp_path, publish_runs: bool | None = None) -> None:
        self.broker = Broker(durability=Durability(tmp_path / "data", fsync=False))
        self.conn = ServerConnection(self.broker.server_properties(), MECHANISMS)
        self.glue = GlueCalls()
        self.handler = ConnectionHandler(self.broker, self.conn, ("127.0.0.1", 40000), self.glue, publish_runs)
        self.kinds: list[type] = []
        self.feed(method_frame(0, spec.ConnectionStartOk({}, "PLAIN", b"\0guest\0guest", "en_US").encode())
                  + method_frame(0, spec.ConnectionTuneOk(2047, 131072, 0).encode())
                  + method_frame(0, spec.ConnectionOpen("/").encode())
                  + method_frame(1, spec.ChannelOpen().encode()))
        assert self.glue.opened_count == 1 and self.conn.is_open
        self.replies()

    def feed(self, data: bytes) -> None:
        self.kinds = []
        self.conn.receive_data(data)
        while (event := self.conn.next_event()) is not None:
            self.kinds.append(type(event))
            self.handler.handle(event)

    def send(self, channel: int, method) -> None:
        self.feed(method_frame(channel, method.encode()))

    def replies(self) -> list:
        """The methods the server queued since the last call, as (channel, method)."""
        fb = FrameBuffer(0)
        fb.feed(b"".join(bytes(p) for p in self.conn.data_to_send()))
        out = []
        while (f := fb.next_frame()) is not None:
            ftype, channel, start, end = f
            if ftype == FRAME_METHOD:
                payload = bytes(fb.buf[start:end])
                out.append((channel, spec.METHODS[struct.unpack_from(">I", payload)[0]].decode(payload, 4)[0]))
        return out

    def queued(self, queue: str) -> list[bytes]:
        return [bytes(entry[1].body) for entry in self.broker.vhosts["/"].queues[queue].ready]


@pytest.mark.parametrize("publish_runs, before_confirms, after_confirms", [
    (None, Content, Publishes),  # the default: runs once a channel selects confirms
    (True, Publishes, Publishes),  # --publish-runs: from the start
    (False, Content, Content),  # --no-publish-runs: never
])
def test_publish_runs_decides_when_consecutive_publishes_are_one_event(tmp_path, publish_runs, before_confirms,
                                                                       after_confirms):
    c = Client(tmp_path, publish_runs)
    c.send(1, spec.QueueDeclare(queue="runs"))
    c.feed(b"".join(publish("runs", b"plain-%d" % i) for i in range(10)))
    assert set(c.kinds) == {before_confirms}
    assert len(c.kinds) == (10 if before_confirms is Content else 1)
    c.send(1, spec.ConfirmSelect())
    assert c.conn.publish_run_max == (1 if publish_runs is False else PUBLISH_RUN_MAX)
    c.replies()
    c.feed(b"".join(publish("runs", b"confirmed-%d" % i) for i in range(10)))
    assert set(c.kinds) == {after_confirms}
    # whatever the events, the same messages in the same order, and one ack covering them all
    assert c.queued("runs") == [b"plain-%d" % i for i in range(10)] + [b"confirmed-%d" % i for i in range(10)]
    c.handler.before_flush()
    assert c.replies() == [(1, spec.BasicAck(delivery_tag=10, multiple=True))]


def test_an_idle_connection_holds_no_confirm_set_and_no_exclusive_queue_set(tmp_path):
    """Made on first use (docs/performance.md, the idle connection's memory): an empty set is
    216 B, and 10,000 idle connections hold none."""
    c = Client(tmp_path)
    assert c.handler._confirming is None and c.handler._exclusive_queues is None
    c.send(1, spec.QueueDeclare(queue="mine", exclusive=True))
    c.send(1, spec.ConfirmSelect())
    assert [q.name for q in c.handler.exclusive_queues] == ["mine"]
    assert c.handler._confirming == set()
    c.handler.connection_lost()
    assert "mine" not in c.broker.vhosts["/"].queues  # still deleted with its connection


def test_an_error_without_ids_gets_those_of_the_method_being_handled(tmp_path):
    c = Client(tmp_path)
    c.send(1, spec.QueueDeclare(queue="missing", passive=True))
    [(channel, close)] = c.replies()
    assert (channel, close.reply_code, close.class_id, close.method_id) == (1, 404, 50, 10)


def test_an_ack_run_names_basic_ack_in_its_refusal(tmp_path):
    """Acks carry no method (the error path does not look for one): ack_run names basic.ack."""
    c = Client(tmp_path)
    c.feed(b"".join(method_frame(1, spec.BasicAck(delivery_tag=tag).encode()) for tag in (1, 2, 3)))
    assert c.kinds == [Acks]
    [(channel, close)] = c.replies()
    assert (channel, close.reply_code, close.class_id, close.method_id) == (1, 406, 60, 80)
