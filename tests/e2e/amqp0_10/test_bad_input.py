"""Bad 0-10 input over a real socket: each gets the right answer (execution.exception and detach,
session.detached, or connection.close framing-error), a log line naming the peer, and every
other connection and session keeps being served."""

from __future__ import annotations

import time

import pytest

from tests.conftest import launch_broker
from warren.codec.amqp0_10.frames import SEGMENT_BODY, SEGMENT_COMMAND, SEGMENT_HEADER, assembly_frames, encode_frame
from warren.codec.amqp0_10.types import encode_command, encode_header
from warren.protocol.amqp0_10 import events as ev
from warren.spec import amqp0_10 as spec

from .client010 import Client010, ConnectionLost

E = spec.ExecutionErrorCode
ALL = 0x0F  # first/last segment, first/last frame


@pytest.fixture(scope="module")
def bad_broker(tmp_path_factory):
    b = launch_broker(tmp_path_factory.mktemp("bad010"), "--max-message-size", str(64 * 1024))
    try:
        yield b
    finally:
        b.stop()


def _log_has(b, *words: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = b.log_path.read_text(errors="replace")
        if any(all(w in line for w in words) for line in text.splitlines()):
            return True
        time.sleep(0.05)
    return False


def _still_served(b) -> None:
    with Client010(b) as other:
        assert other.session(1).send(spec.ExchangeQuery(name="amq.direct")).type == "direct"


def _closed_with_framing_error(c: Client010) -> None:
    try:
        closed = c.wait(ev.ConnectionClosed)
    except ConnectionLost:
        return  # closed after the grace time without our close-ok: also acceptable
    assert closed.code == spec.ConnectionCloseCode.FRAMING_ERROR


def test_malformed_frame_header_closes_the_connection_with_framing_error(bad_broker):
    with Client010(bad_broker) as c:
        port = c.sock.getsockname()[1]
        c.conn.send_raw(b"\xc0\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00\x00")  # frame format version 3
        c.flush()
        _closed_with_framing_error(c)
    assert _log_has(bad_broker, "AMQP 0-10 protocol error", f":{port}")
    _still_served(bad_broker)


def test_frame_size_below_the_header_is_malformed(bad_broker):
    with Client010(bad_broker) as c:
        c.conn.send_raw(b"\x0f\x01\x00\x05\x00\x01\x00\x01\x00\x00\x00\x00")
        c.flush()
        _closed_with_framing_error(c)
    _still_served(bad_broker)


def test_segments_out_of_order_close_the_connection(bad_broker):
    with Client010(bad_broker) as c:
        c.session(1)
        header = encode_header([spec.MessageDeliveryProperties(routing_key="q")])
        c.conn.send_raw(encode_frame(ALL, SEGMENT_HEADER, 1, header))  # a header with no command before it
        c.flush()
        _closed_with_framing_error(c)
    _still_served(bad_broker)


def test_command_on_a_channel_without_session_is_answered_detached(bad_broker):
    with Client010(bad_broker) as c:
        keep = c.session(1)
        c.conn.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 7, encode_command(spec.QueueQuery(queue="x"), True)))
        c.flush()
        assert keep.send(spec.ExchangeQuery(name="amq.topic")).type == "topic"
        # the answer, session.detached(not-attached) on channel 7, has no event on the client side
        # (it holds no session there): the broker's log line says it was given
    assert _log_has(bad_broker, "channel 7", "no session is attached", "detached 3")


def test_unknown_command_gets_not_implemented_and_the_session_is_detached(bad_broker):
    with Client010(bad_broker) as c:
        s = c.session(1)
        other = c.session(2)
        c.conn.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 1, b"\x04\x7f\x01\x01\x00\x00"), command_on=1)
        c.flush()
        c.wait(ev.SessionDetached, channel=1)
        assert s.exception.error_code == E.NOT_IMPLEMENTED and s.exception.command_id == 0
        # commands on the detached session are not answered; the connection's other session is
        assert other.send(spec.QueueDeclare(queue="after-unknown", auto_delete=True)) is None
    assert _log_has(bad_broker, "AMQP 0-10 protocol error", "channel 1")


def test_undecodable_command_fields_get_illegal_argument(bad_broker):
    with Client010(bad_broker) as c:
        s = c.session(1)
        # queue.declare whose packing flags say a str8 follows, but the segment ends
        c.conn.send_raw(encode_frame(ALL, SEGMENT_COMMAND, 1, b"\x08\x01\x01\x01\x01\x00"), command_on=1)
        c.flush()
        c.wait(ev.SessionDetached, channel=1)
        assert s.exception.error_code == E.ILLEGAL_ARGUMENT
    _still_served(bad_broker)


def test_message_over_the_size_limit_is_refused_and_the_connection_carries_on(bad_broker):
    with Client010(bad_broker) as c:
        s = c.session(1)
        keep = c.session(2)
        keep.send(spec.QueueDeclare(queue="big-010", auto_delete=True))
        segments = [(SEGMENT_COMMAND, encode_command(spec.MessageTransfer(destination=""), True)),
                    (SEGMENT_HEADER, encode_header([spec.MessageDeliveryProperties(routing_key="big-010")])),
                    (SEGMENT_BODY, b"x" * (200 * 1024))]  # over --max-message-size 64 KiB, many frames
        c.conn.send_raw(b"".join(bytes(f) for f in assembly_frames(1, segments)), command_on=1)
        c.flush()
        c.wait(ev.SessionDetached, channel=1)
        assert s.exception.error_code == E.RESOURCE_LIMIT_EXCEEDED
        keep.transfer("", b"small", routing_key="big-010")
        assert keep.send(spec.QueueQuery(queue="big-010")).message_count == 1


def test_a_frame_larger_than_the_segment_limits_is_refused(bad_broker):
    """A command segment over 1 MiB (in 65535-octet frames): refused, the rest read and dropped."""
    with Client010(bad_broker) as c:
        s = c.session(1)
        huge = encode_command(spec.QueueDeclare(queue="x" * 200, arguments={"pad": "y" * 60000}), False)
        frames = []
        payload = huge * 20  # > 1 MiB of one command segment
        chunk = 65535 - 12
        parts = [payload[i:i + chunk] for i in range(0, len(payload), chunk)]
        for i, part in enumerate(parts):
            flags = 0x0C | (0x02 if i == 0 else 0) | (0x01 if i == len(parts) - 1 else 0)
            frames.append(encode_frame(flags, SEGMENT_COMMAND, 1, part))
        c.conn.send_raw(b"".join(frames), command_on=1)
        c.flush()
        c.wait(ev.SessionDetached, channel=1, timeout=10)
        assert s.exception.error_code == E.RESOURCE_LIMIT_EXCEEDED
    _still_served(bad_broker)
