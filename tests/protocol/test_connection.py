"""The sans-IO server connection (warren.protocol.amqp0_9_1.connection), driven with bytes only.

A small client model builds frames with ``method_frame(channel, method.encode())`` and reads what
the server queued with ``data_to_send()``; the broker's decisions are the ``accept_*`` calls.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from warren.codec.frames import FRAME_BODY, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD, HEARTBEAT_FRAME, \
    FrameBuffer, content_frames, header_payload, method_frame
from warren.errors import (
    AMQPError, ChannelError, CommandInvalid, FrameError, NotAllowed, NotImplemented_,
    PreconditionFailed, SyntaxError_, UnexpectedFrame,
)
from warren.protocol.amqp0_9_1 import connection as connection_module
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.events import Acks, ChannelClosed, ChannelOpened, ConnectionClosed, Content, Method, Publishes
from warren.spec import amqp0_9_1 as spec

SERVER_PROPERTIES = {"product": "warren", "capabilities": {"publisher_confirms": True}}


# --- the client side ---------------------------------------------------------------------------

def frame(ftype: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def mframe(channel: int, method) -> bytes:
    return method_frame(channel, method.encode())


def header_frame(channel: int, body_size: int, properties: bytes = b"\x00\x00", class_id: int = 60) -> bytes:
    return frame(FRAME_HEADER, channel, header_payload(class_id, body_size, properties))


def body_frame(channel: int, chunk: bytes) -> bytes:
    return frame(FRAME_BODY, channel, chunk)


def publish_frames(channel: int, body: bytes, properties: bytes = b"\x00\x00", frame_max: int = 4096,
                   routing_key: str = "rk") -> bytes:
    method = spec.BasicPublish(exchange="ex", routing_key=routing_key)
    parts = content_frames(channel, 60, properties, body, frame_max)
    return mframe(channel, method) + b"".join(bytes(p) for p in parts)


class Peer:
    """Plays the client against one ServerConnection."""

    def __init__(self, **kw) -> None:
        self.conn = ServerConnection(SERVER_PROPERTIES, **kw)

    def feed(self, data: bytes, bytewise: bool = False) -> list:
        """Feed bytes (whole or one at a time) and return every event until None."""
        if not bytewise:
            self.conn.receive_data(data)
            return self.events()
        out = []
        for i in range(len(data)):
            self.conn.receive_data(data[i:i + 1])
            out += self.events()
        return out

    def events(self) -> list:
        out = []
        while (event := self.conn.next_event()) is not None:
            out.append(event)
        return out

    def send(self, channel: int, method, bytewise: bool = False) -> list:
        return self.feed(mframe(channel, method), bytewise)

    def received(self) -> list:
        """What the server queued, as (channel, method) for method frames, else (type, channel, payload)."""
        data = b"".join(bytes(p) for p in self.conn.data_to_send())
        fb = FrameBuffer(0)
        fb.feed(data)
        out = []
        while (f := fb.next_frame()) is not None:
            ftype, channel, start, end = f
            payload = bytes(fb.buf[start:end])
            if ftype == FRAME_METHOD:
                cls = spec.METHODS[struct.unpack_from(">I", payload)[0]]
                m, off = cls.decode(payload, 4)
                assert off == len(payload)
                out.append((channel, m))
            else:
                out.append((ftype, channel, payload))
        assert fb.pos == len(fb.buf), "the server wrote a partial frame"
        return out

    def handshake(self, channel_max: int = 2047, frame_max: int = 131072, heartbeat: int = 60) -> None:
        start = self.received()
        assert len(start) == 1 and isinstance(start[0][1], spec.ConnectionStart)
        assert self.send(0, spec.ConnectionStartOk({"product": "test"}, "PLAIN", b"\0guest\0guest", "en_US"))
        self.conn.accept_login()
        self.received()
        assert self.send(0, spec.ConnectionTuneOk(channel_max, frame_max, heartbeat))
        assert self.send(0, spec.ConnectionOpen("/"))
        self.conn.accept_open()
        assert self.received() == [(0, spec.ConnectionOpenOk())]
        assert self.conn.is_open

    def open_channel(self, channel: int = 1) -> None:
        events = self.send(channel, spec.ChannelOpen())
        assert [type(e) for e in events] == [ChannelOpened] and events[0].channel == channel
        assert self.received() == [(channel, spec.ChannelOpenOk())]


@pytest.fixture(autouse=True, params=["compiled", "pure-python"])
def publish_path(request, monkeypatch):
    """Every test here runs twice: with the compiled publish and deliver fast paths
    (warren/codec/_speedups.c) and with their pure-Python twins, which run where the extension
    is not built."""
    if request.param == "compiled":
        if connection_module._take_publish is None:
            pytest.skip("warren.codec._speedups is not built (setup.py; tests/protocol/test_speedups.py says why)")
    else:
        monkeypatch.setattr(connection_module, "_take_publish", None)
        monkeypatch.setattr(connection_module, "_take_publishes", None)
        monkeypatch.setattr(connection_module, "_take_acks", None)
        monkeypatch.setattr(connection_module, "_deliver_frames", None)
    return request.param


@pytest.fixture
def peer() -> Peer:
    return Peer()


@pytest.fixture
def open_peer() -> Peer:
    p = Peer(frame_max=4096 * 4, channel_max=16)
    p.handshake(channel_max=16, frame_max=4096 * 4)
    p.open_channel(1)
    return p


def raises(exc_type, code: int, fn, *args, **kw):
    with pytest.raises(exc_type) as ei:
        fn(*args, **kw)
    assert ei.value.reply_code == code
    return ei.value


# --- handshake ---------------------------------------------------------------------------------

def test_a_new_connection_queues_connection_start_for_0_9(peer):
    [(channel, start)] = peer.received()
    assert channel == 0
    assert (start.version_major, start.version_minor) == (0, 9)
    assert start.server_properties == SERVER_PROPERTIES
    assert start.mechanisms == b"PLAIN AMQPLAIN" and start.locales == b"en_US"
    assert peer.received() == []  # data_to_send hands everything over once


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "byte-by-byte"])
def test_the_handshake_yields_method_events_and_writes_tune_and_open_ok(peer, bytewise):
    peer.received()
    start_ok = spec.ConnectionStartOk({"product": "test", "n": [1, 2]}, "PLAIN", b"\0u\0p", "en_US")
    events = peer.send(0, start_ok, bytewise)
    assert [type(e) for e in events] == [Method]
    assert events[0].channel == 0 and events[0].method == start_ok
    assert peer.received() == []  # nothing until the broker accepts the login

    peer.conn.accept_login()
    assert peer.received() == [(0, spec.ConnectionTune(2047, 131072, 60))]

    events = peer.send(0, spec.ConnectionTuneOk(100, 65536, 30), bytewise)
    assert [type(e) for e in events] == [Method] and isinstance(events[0].method, spec.ConnectionTuneOk)
    assert (peer.conn.channel_max, peer.conn.frame_max, peer.conn.heartbeat) == (100, 65536, 30)
    assert peer.conn.frames.max_frame_size == 65536

    events = peer.send(0, spec.ConnectionOpen("/vhost"), bytewise)
    assert [type(e) for e in events] == [Method] and events[0].method.virtual_host == "/vhost"
    assert not peer.conn.is_open
    peer.conn.accept_open()
    assert peer.conn.is_open
    assert peer.received() == [(0, spec.ConnectionOpenOk())]


def test_the_whole_client_handshake_in_one_read_yields_three_events():
    p = Peer()
    p.received()
    data = (mframe(0, spec.ConnectionStartOk({}, "PLAIN", b"\0u\0p", "en_US"))
            + mframe(0, spec.ConnectionTuneOk(2047, 131072, 60)) + mframe(0, spec.ConnectionOpen("/")))
    p.conn.receive_data(data)
    first = p.conn.next_event()
    assert isinstance(first.method, spec.ConnectionStartOk)
    p.conn.accept_login()
    assert isinstance(p.conn.next_event().method, spec.ConnectionTuneOk)
    assert isinstance(p.conn.next_event().method, spec.ConnectionOpen)
    assert p.conn.next_event() is None


def test_tune_ok_with_zero_heartbeat_and_our_limits_is_accepted(peer):
    peer.handshake(channel_max=2047, frame_max=131072, heartbeat=0)
    assert peer.conn.heartbeat == 0


@pytest.mark.parametrize("channel_max,frame_max", [
    (2047, 131073),  # above our frame-max
    (2047, 0),  # "no limit" is above any limit we set
    (2047, 4095),  # below frame-min-size
    (2048, 131072),  # above our channel-max
    (0, 131072),  # no limit, again refused (RabbitMQ)
])
def test_tune_ok_outside_our_limits_is_refused_with_530(peer, channel_max, frame_max):
    peer.send(0, spec.ConnectionStartOk())
    peer.conn.accept_login()
    err = raises(NotAllowed, 530, peer.send, 0, spec.ConnectionTuneOk(channel_max, frame_max, 60))
    assert (err.class_id, err.method_id) == (10, 31)


def test_a_connection_method_out_of_order_is_command_invalid(peer):
    raises(CommandInvalid, 503, peer.send, 0, spec.ConnectionOpen("/"))


def test_a_second_start_ok_while_the_login_is_checked_is_command_invalid(peer):
    peer.send(0, spec.ConnectionStartOk())
    raises(CommandInvalid, 503, peer.send, 0, spec.ConnectionStartOk())


def test_a_heartbeat_is_silently_accepted_at_any_time(peer):
    assert peer.feed(HEARTBEAT_FRAME) == []
    peer.handshake()
    assert peer.feed(HEARTBEAT_FRAME * 3) == []


def test_a_heartbeat_on_a_channel_is_a_frame_error(open_peer):
    raises(FrameError, 501, open_peer.feed, frame(FRAME_HEARTBEAT, 1, b""))


def test_a_frame_up_to_our_frame_max_is_accepted_before_tune(peer):
    # some clients send a start-ok with large client properties before tune-ok
    big = spec.ConnectionStartOk({"blob": b"x" * 100_000}, "PLAIN", b"\0u\0p", "en_US")
    [event] = peer.send(0, big)
    assert event.method.client_properties["blob"] == b"x" * 100_000


def test_a_start_ok_with_absurdly_deep_client_properties_is_a_syntax_error(peer):
    nested = b""
    for _ in range(3000):
        nested = b"A" + struct.pack(">I", len(nested)) + nested
    table = b"\x01a" + nested
    args = struct.pack(">I", len(table)) + table + b"\x05PLAIN" + b"\x00\x00\x00\x00" + b"\x05en_US"
    raises(SyntaxError_, 502, peer.feed, method_frame(0, b"\x00\x0a\x00\x0b" + args))


# --- channels --------------------------------------------------------------------------------------

def test_channel_open_yields_channel_opened_and_writes_open_ok(open_peer):
    open_peer.open_channel(2)
    assert open_peer.conn.channel_is_open(2)


def test_a_method_on_an_open_channel_is_a_method_event(open_peer):
    [event] = open_peer.send(1, spec.QueueDeclare(queue="q", durable=True))
    assert isinstance(event, Method) and event.channel == 1
    assert event.method == spec.QueueDeclare(queue="q", durable=True)


def test_a_method_on_an_unopened_channel_is_a_channel_error(open_peer):
    err = raises(ChannelError, 504, open_peer.send, 2, spec.BasicQos(0, 10, False))
    assert (err.class_id, err.method_id) == (60, 10)


def test_a_channel_method_before_the_connection_is_open_is_a_channel_error(peer):
    peer.send(0, spec.ConnectionStartOk())
    raises(ChannelError, 504, peer.send, 1, spec.ChannelOpen())


def test_a_second_channel_open_is_a_channel_error(open_peer):
    err = raises(ChannelError, 504, open_peer.send, 1, spec.ChannelOpen())
    assert (err.class_id, err.method_id) == (20, 10)


def test_any_channel_number_opens_and_channel_max_limits_how_many_are_open(open_peer):
    # RabbitMQ: numbers 1..65535 whatever channel-max is (aiormq opens 65535); channel-max
    # counts open channels (open_peer negotiated 16, channel 1 is open)
    open_peer.open_channel(65535)
    open_peer.open_channel(17)
    for n in range(100, 113):
        open_peer.open_channel(n)
    err = raises(NotAllowed, 530, open_peer.send, 2, spec.ChannelOpen())
    assert err.reply_text == "NOT_ALLOWED - number of channels opened (16) has reached the negotiated channel_max (16)"
    assert (err.class_id, err.method_id) == (0, 0)  # RabbitMQ names no method
    assert not open_peer.conn.channel_is_open(2)


def test_a_closed_channel_frees_its_place_under_channel_max(open_peer):
    for n in range(2, 17):
        open_peer.open_channel(n)
    open_peer.send(5, spec.ChannelClose(200, "", 0, 0))
    open_peer.received()
    open_peer.open_channel(40000)
    raises(NotAllowed, 530, open_peer.send, 5, spec.ChannelOpen())


def test_a_connection_method_on_a_channel_is_command_invalid(open_peer):
    raises(CommandInvalid, 503, open_peer.send, 1, spec.ConnectionClose(200, "", 0, 0))


def test_a_channel_method_on_channel_zero_is_a_channel_error(open_peer):
    # RabbitMQ: 504 "unexpected method in connection state running"
    err = raises(ChannelError, 504, open_peer.send, 0, spec.BasicQos(0, 1, False))
    assert (err.class_id, err.method_id) == (60, 10)


def test_channel_close_from_the_client_writes_close_ok_and_yields_channel_closed(open_peer):
    [event] = open_peer.send(1, spec.ChannelClose(200, "bye", 0, 0))
    assert isinstance(event, ChannelClosed)
    assert (event.channel, event.reply_code, event.reply_text) == (1, 200, "bye")
    assert open_peer.received() == [(1, spec.ChannelCloseOk())]
    assert not open_peer.conn.channel_is_open(1)
    open_peer.open_channel(1)  # the number can be reused


def test_after_close_channel_input_on_it_is_discarded_until_close_ok(open_peer):
    open_peer.conn.close_channel(1, PreconditionFailed("nope", 60, 40))
    [(channel, close)] = open_peer.received()
    assert channel == 1 and close.reply_code == 406 and close.reply_text == "PRECONDITION_FAILED - nope"
    assert (close.class_id, close.method_id) == (60, 40)
    assert open_peer.send(1, spec.BasicQos(0, 1, False)) == []
    assert open_peer.feed(publish_frames(1, b"in flight")) == []
    [event] = open_peer.send(1, spec.ChannelCloseOk())
    assert isinstance(event, ChannelClosed) and event.channel == 1
    assert open_peer.received() == []
    assert open_peer.send(1, spec.ChannelCloseOk()) == []  # a stray close-ok is harmless


def test_a_client_close_crossing_our_close_is_answered_with_close_ok(open_peer):
    open_peer.conn.close_channel(1, PreconditionFailed("nope"))
    open_peer.received()
    [event] = open_peer.send(1, spec.ChannelClose(200, "", 0, 0))
    assert isinstance(event, ChannelClosed)
    assert open_peer.received() == [(1, spec.ChannelCloseOk())]


# --- content -----------------------------------------------------------------------------------

@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize("size", [1, 100, 4096 * 4 - 8, 4096 * 4 - 7, 50_000])
def test_publish_header_and_body_frames_yield_one_content_event(open_peer, bytewise, size):
    body = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    props = spec.BasicProperties(content_type="text/plain", headers={"h": 1}).encode()
    data = publish_frames(1, body, props, frame_max=4096 if size > 4096 else 0)
    events = open_peer.feed(data, bytewise)
    assert [type(e) for e in events] == [Content]
    [content] = events
    assert content.channel == 1
    assert content.method == spec.BasicPublish(exchange="ex", routing_key="rk")
    assert bytes(content.properties) == props
    assert bytes(content.body) == body


def test_content_body_split_into_uneven_frames_is_reassembled(open_peer):
    body = b"abcdefghij" * 10
    data = mframe(1, spec.BasicPublish(exchange="", routing_key="q")) + header_frame(1, len(body))
    for chunk in (body[:1], body[1:50], b"", body[50:99], body[99:]):
        data += body_frame(1, chunk)
    [content] = open_peer.feed(data)
    assert bytes(content.body) == body


def test_a_body_size_of_zero_yields_content_right_after_the_header(open_peer):
    assert open_peer.send(1, spec.BasicPublish(routing_key="q")) == []
    [content] = open_peer.feed(header_frame(1, 0, b"\x10\x00\x02"))
    assert isinstance(content, Content) and bytes(content.body) == b""
    assert content.properties == b"\x10\x00\x02"
    [event] = open_peer.send(1, spec.BasicQos(0, 1, False))  # the channel takes methods again
    assert isinstance(event, Method)


def test_no_content_event_until_the_last_body_octet(open_peer):
    body = b"x" * 1000
    data = publish_frames(1, body, frame_max=300)
    assert open_peer.feed(data[:-1]) == []
    [content] = open_peer.feed(data[-1:])
    assert bytes(content.body) == body


def test_contents_on_two_channels_may_interleave(open_peer):
    open_peer.open_channel(2)
    data = (mframe(1, spec.BasicPublish(routing_key="one")) + mframe(2, spec.BasicPublish(routing_key="two"))
            + header_frame(2, 3) + header_frame(1, 3) + body_frame(1, b"111") + body_frame(2, b"222"))
    events = open_peer.feed(data)
    assert [(e.channel, e.method.routing_key, bytes(e.body)) for e in events] == [
        (1, "one", b"111"), (2, "two", b"222")]


def test_consecutive_contents_on_one_channel_are_separate_events(open_peer):
    data = publish_frames(1, b"first", routing_key="a") + publish_frames(1, b"second", routing_key="b")
    events = open_peer.feed(data, bytewise=True)
    assert [(e.method.routing_key, bytes(e.body)) for e in events] == [("a", b"first"), ("b", b"second")]


def test_a_content_body_survives_later_input(open_peer):
    [c1] = open_peer.feed(publish_frames(1, b"keep me"))
    open_peer.feed(publish_frames(1, b"x" * 64) + HEARTBEAT_FRAME)
    assert bytes(c1.body) == b"keep me"


def test_a_content_header_without_a_publish_is_an_unexpected_frame(open_peer):
    raises(UnexpectedFrame, 505, open_peer.feed, header_frame(1, 5))


def test_a_body_frame_without_a_publish_is_an_unexpected_frame(open_peer):
    raises(UnexpectedFrame, 505, open_peer.feed, body_frame(1, b"x"))


def test_a_body_frame_before_the_header_is_an_unexpected_frame(open_peer):
    open_peer.send(1, spec.BasicPublish())
    raises(UnexpectedFrame, 505, open_peer.feed, body_frame(1, b"x"))


def test_a_second_header_is_an_unexpected_frame(open_peer):
    open_peer.feed(mframe(1, spec.BasicPublish()) + header_frame(1, 5))
    raises(UnexpectedFrame, 505, open_peer.feed, header_frame(1, 5))


def test_content_on_an_unopened_channel_is_a_channel_error(open_peer):
    raises(ChannelError, 504, open_peer.feed, header_frame(3, 5))


def test_content_on_channel_zero_is_refused(open_peer):
    with pytest.raises((CommandInvalid, ChannelError, UnexpectedFrame)):
        open_peer.feed(body_frame(0, b"x"))


@pytest.mark.parametrize("after", ["method", "header"])
def test_a_method_while_a_content_is_incomplete_is_an_unexpected_frame(open_peer, after):
    data = mframe(1, spec.BasicPublish())
    if after == "header":
        data += header_frame(1, 10) + body_frame(1, b"12345")
    open_peer.feed(data)
    err = raises(UnexpectedFrame, 505, open_peer.send, 1, spec.BasicQos(0, 1, False))
    assert (err.class_id, err.method_id) == (60, 10)


def test_a_header_of_another_class_is_an_unexpected_frame(open_peer):
    open_peer.send(1, spec.BasicPublish())
    raises(UnexpectedFrame, 505, open_peer.feed, header_frame(1, 1, class_id=50))


def test_a_header_shorter_than_its_12_fixed_octets_is_a_frame_error(open_peer):
    open_peer.send(1, spec.BasicPublish())
    raises(FrameError, 501, open_peer.feed, frame(FRAME_HEADER, 1, struct.pack(">HHI", 60, 0, 1)))


def test_a_header_without_its_property_flags_is_a_frame_error_not_541(open_peer):
    # RabbitMQ 3.10 answers a 12- or 13-octet header payload with connection.close 541 (its
    # crash); the octets are cut short, the client's fault: 501 (warren/codec/refusals.py)
    open_peer.send(1, spec.BasicPublish())
    err = raises(FrameError, 501, open_peer.feed, frame(FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, 1)))
    assert (err.class_id, err.method_id) == (60, 40)


def test_a_body_longer_than_declared_is_a_frame_error(open_peer):
    open_peer.feed(mframe(1, spec.BasicPublish()) + header_frame(1, 3) + body_frame(1, b"12"))
    raises(FrameError, 501, open_peer.feed, body_frame(1, b"34"))


def test_a_message_larger_than_max_message_size_is_a_precondition_failure_on_its_channel():
    p = Peer(max_message_size=100)
    p.handshake()
    p.open_channel(5)
    [content] = p.feed(publish_frames(5, b"x" * 100))  # exactly the limit is fine
    assert len(content.body) == 100
    p.send(5, spec.BasicPublish(exchange="ex"))
    err = raises(PreconditionFailed, 406, p.feed, header_frame(5, 101))
    assert err.channel == 5
    assert (err.class_id, err.method_id) == (60, 40)
    # the broker answers with close_channel; the rest of that content is then discarded
    p.conn.close_channel(err.channel, err)
    assert p.feed(body_frame(5, b"x" * 101)) == []
    assert [type(m) for _, m in p.received()] == [spec.ChannelClose]


# --- malformed input ---------------------------------------------------------------------------

def test_an_unknown_method_is_not_implemented(open_peer):
    err = raises(NotImplemented_, 540, open_peer.feed, method_frame(1, b"\x00\x3c\x03\xe7"))
    assert (err.class_id, err.method_id) == (60, 999)


def test_an_unknown_class_is_not_implemented(peer):
    raises(NotImplemented_, 540, peer.feed, method_frame(0, b"\xf0\x00\x00\x01args"))


def test_a_method_frame_shorter_than_its_ids_is_a_frame_error(open_peer):
    raises(FrameError, 501, open_peer.feed, method_frame(1, b"\x00\x3c\x00"))


# Arguments that run out of octets are answered as RabbitMQ does, with 501 FRAME_ERROR; values
# that cannot be what they claim are 502 SYNTAX_ERROR.

@pytest.mark.parametrize("cut", [0, 1, 5, 8])
def test_truncated_method_arguments_are_a_frame_error(open_peer, cut):
    args = spec.BasicPublish(exchange="ex", routing_key="rk").encode()[4:]  # 2 + 3 + 3 + 1 octets
    assert len(args) == 9
    err = raises(FrameError, 501, open_peer.feed, method_frame(1, b"\x00\x3c\x00\x28" + args[:cut]))
    assert (err.class_id, err.method_id) == (60, 40)


def test_any_method_cut_by_one_octet_is_a_frame_error_whatever_the_state(open_peer):
    for cls in spec.METHODS.values():
        if cls.FIELDS:
            payload = cls().encode()[:-1]
            raises(FrameError, 501, open_peer.feed, method_frame(0 if cls.CLASS_ID == 10 else 1, payload))


def test_truncated_arguments_are_refused_even_when_the_next_frame_follows(open_peer):
    # the decoder reads past the frame into the next one: still refused, not a misparse
    data = method_frame(1, b"\x00\x3c\x00\x28\x00\x00\x05ab") + mframe(1, spec.BasicQos(0, 1, False))
    raises(FrameError, 501, open_peer.feed, data)


def test_a_truncated_argument_does_not_stop_later_parsing(open_peer):
    # frame boundaries are intact, so after the broker's close_connection the close-ok is found
    raises(FrameError, 501, open_peer.feed, method_frame(1, b"\x00\x3c\x00\x28"))
    open_peer.conn.close_connection(501, "FRAME_ERROR")
    [event] = open_peer.send(0, spec.ConnectionCloseOk())
    assert isinstance(event, ConnectionClosed)


def test_a_malformed_table_argument_is_a_syntax_error(open_peer):
    args = b"\x00\x00\x01q\x00" + b"\x00\x00\x00\x03\x01aZ"  # unknown field type Z
    raises(SyntaxError_, 502, open_peer.feed, method_frame(1, b"\x00\x32\x00\x0a" + args))


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "byte-by-byte"])
def test_a_bad_frame_end_is_a_frame_error_and_nothing_is_parsed_afterwards(open_peer, bytewise):
    good = mframe(1, spec.BasicQos(0, 1, False))
    bad = frame(FRAME_METHOD, 1, spec.BasicQos(0, 1, False).encode(), end=0x00)
    with pytest.raises(FrameError) as ei:
        open_peer.feed(good + bad + good, bytewise)
    assert ei.value.reply_code == 501
    for _ in range(3):
        assert open_peer.conn.next_event() is None
    open_peer.conn.receive_data(good * 3)
    assert open_peer.conn.next_event() is None


def test_an_unknown_frame_type_is_a_frame_error(open_peer):
    raises(FrameError, 501, open_peer.feed, frame(4, 1, b"oob"))
    assert open_peer.feed(mframe(1, spec.BasicQos(0, 1, False))) == []


def test_a_frame_above_the_negotiated_frame_max_is_a_frame_error(open_peer):
    header = struct.pack(">BHI", FRAME_BODY, 1, 4096 * 4 - 7)  # one octet over
    raises(FrameError, 501, open_peer.feed, header)


# --- connection close --------------------------------------------------------------------------

def test_connection_close_from_the_client_writes_close_ok_and_yields_connection_closed(open_peer):
    [event] = open_peer.send(0, spec.ConnectionClose(320, "shutting down", 0, 0))
    assert isinstance(event, ConnectionClosed)
    assert (event.reply_code, event.reply_text) == (320, "shutting down")
    assert open_peer.received() == [(0, spec.ConnectionCloseOk())]
    assert open_peer.conn.is_closed
    assert open_peer.feed(mframe(1, spec.BasicQos(0, 1, False)) + mframe(0, spec.ConnectionCloseOk())) == []


def test_connection_close_is_accepted_during_the_handshake(peer):
    peer.received()
    [event] = peer.send(0, spec.ConnectionClose(200, "", 0, 0))
    assert isinstance(event, ConnectionClosed)
    assert peer.received() == [(0, spec.ConnectionCloseOk())]


def test_after_close_connection_only_close_ok_is_taken(open_peer):
    open_peer.conn.close_connection(541, "INTERNAL_ERROR", 60, 40)
    assert open_peer.received() == [(0, spec.ConnectionClose(541, "INTERNAL_ERROR", 60, 40))]
    noise = (mframe(1, spec.BasicQos(0, 1, False)) + publish_frames(1, b"body") + HEARTBEAT_FRAME
             + mframe(0, spec.ConnectionOpen("/")) + mframe(3, spec.ChannelOpen())
             + method_frame(0, b"\x00\x63\x00\x01") + header_frame(0, 1) + frame(FRAME_METHOD, 0, b"\x00"))
    assert open_peer.feed(noise) == []
    assert open_peer.received() == []
    [event] = open_peer.send(0, spec.ConnectionCloseOk())
    assert isinstance(event, ConnectionClosed)
    assert open_peer.conn.is_closed
    assert open_peer.send(0, spec.ConnectionCloseOk()) == []


def test_a_client_close_crossing_our_close_is_answered_and_ends_the_connection(open_peer):
    open_peer.conn.close_connection(501, "FRAME_ERROR")
    open_peer.received()
    [event] = open_peer.send(0, spec.ConnectionClose(200, "", 0, 0))
    assert isinstance(event, ConnectionClosed)
    assert open_peer.received() == [(0, spec.ConnectionCloseOk())]
    assert open_peer.conn.sent_close_ok  # the peer closes the socket


def test_after_the_close_handshake_frames_in_flight_are_discarded(open_peer):
    # amqplib writes a channel's buffered publishes behind its connection.close: after
    # close-ok they are read and dropped; a repeated close gets close-ok again (RabbitMQ)
    [event] = open_peer.send(0, spec.ConnectionClose(200, "bye", 0, 0))
    assert isinstance(event, ConnectionClosed) and open_peer.conn.sent_close_ok
    open_peer.received()
    in_flight = publish_frames(1, b"late") * 50 + mframe(1, spec.BasicQos(0, 1, False)) + mframe(7, spec.ChannelOpen())
    assert open_peer.feed(in_flight) == [] and open_peer.received() == []
    assert open_peer.send(0, spec.ConnectionClose(200, "again", 0, 0)) == []
    assert open_peer.received() == [(0, spec.ConnectionCloseOk())]
    # even a frame error is only the end of reading now, not an error to answer
    assert open_peer.feed(frame(FRAME_METHOD, 1, b"\x00\x3c\x00\x28", end=0x00)) == []
    assert open_peer.received() == [] and not open_peer.conn.reads_input


def test_our_close_ended_by_close_ok_is_not_the_peer_closing(open_peer):
    open_peer.conn.close_connection(320, "CONNECTION_FORCED - broker shutdown")
    open_peer.received()
    assert open_peer.feed(publish_frames(1, b"late") * 10) == []
    [event] = open_peer.send(0, spec.ConnectionCloseOk())
    assert isinstance(event, ConnectionClosed) and not open_peer.conn.sent_close_ok


def test_close_connection_twice_sends_one_close(open_peer):
    open_peer.conn.close_connection(320, "bye")
    open_peer.conn.close_connection(320, "bye")
    assert len(open_peer.received()) == 1


def test_a_long_reply_text_is_cut_to_a_valid_shortstr(open_peer):
    open_peer.conn.close_connection(541, "é" * 200)
    [(_, close)] = open_peer.received()
    assert len(close.reply_text.encode()) <= 255 and close.reply_text == "é" * 127


# --- output ---------------------------------------------------------------------------------

def test_send_content_splits_the_body_by_the_negotiated_frame_max(open_peer):
    open_peer.conn.send_content(1, spec.BasicGetOk(1, False, "ex", "rk", 0), b"\x00\x00", b"z" * 40000)
    out = open_peer.received()
    assert out[0] == (1, spec.BasicGetOk(1, False, "ex", "rk", 0))
    assert out[1] == (FRAME_HEADER, 1, header_payload(60, 40000, b"\x00\x00"))
    assert [len(p) for _, _, p in out[2:]] == [4096 * 4 - 8] * 2 + [40000 - 2 * (4096 * 4 - 8)]


def test_send_deliver_writes_the_same_bytes_as_the_generated_encoder(open_peer):
    from warren.spec.fields import encode_shortstr
    open_peer.conn.send_deliver(1, encode_shortstr("ctag"), 2**40, True, encode_shortstr("ex"),
                                encode_shortstr("r.k"), b"\x80\x00\x01t", b"body")
    out = open_peer.received()
    assert out[0] == (1, spec.BasicDeliver("ctag", 2**40, True, "ex", "r.k"))
    assert out[1:] == [(FRAME_HEADER, 1, header_payload(60, 4, b"\x80\x00\x01t")), (FRAME_BODY, 1, b"body")]


@pytest.mark.parametrize("size", [0, 1, 4096 * 4 - 8, 4096 * 4 - 7, 20_000, 70_000])
def test_send_deliver_frames_any_body_as_the_generated_encoder_would(open_peer, size):
    # one joined bytes for a small body, separate parts for a large one, frames split at frame-max
    from warren.spec.fields import encode_shortstr
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    open_peer.conn.send_deliver(7, encode_shortstr("c"), 3, False, encode_shortstr(""), encode_shortstr("q"),
                                b"\x10\x00\x02", body)
    out = open_peer.received()
    assert out[0] == (7, spec.BasicDeliver("c", 3, False, "", "q"))
    assert out[1] == (FRAME_HEADER, 7, header_payload(60, size, b"\x10\x00\x02"))
    chunk = 4096 * 4 - 8
    assert out[2:] == [(FRAME_BODY, 7, body[i:i + chunk]) for i in range(0, size, chunk)]


def test_identical_publishes_share_the_method_and_the_property_list(open_peer):
    # memory per queued message: equal publishes decode to the same objects (not copies)
    props = spec.BasicProperties(delivery_mode=2).encode()
    a, b = open_peer.feed(publish_frames(1, b"one", props) + publish_frames(1, b"two", props))
    assert a.method is b.method and a.method == spec.BasicPublish(exchange="ex", routing_key="rk")
    assert a.properties is b.properties and a.properties == props
    assert (bytes(a.body), bytes(b.body)) == (b"one", b"two")
    [c] = open_peer.feed(publish_frames(1, b"three", b"\x00\x00", routing_key="other"))
    assert c.method is not a.method and c.method.routing_key == "other"
    assert c.properties == b"\x00\x00"


def test_a_publish_whose_frames_arrive_later_is_assembled_the_same(open_peer):
    data = publish_frames(1, b"x" * 300) + publish_frames(1, b"y" * 300)
    cut = len(mframe(1, spec.BasicPublish(exchange="ex", routing_key="rk"))) + 10  # in the first header
    events = open_peer.feed(data[:cut]) + open_peer.feed(data[cut:])
    assert [bytes(e.body) for e in events] == [b"x" * 300, b"y" * 300]


def test_a_bad_frame_end_right_after_a_publish_is_still_a_frame_error(open_peer):
    data = mframe(1, spec.BasicPublish(exchange="ex", routing_key="rk")) + header_frame(1, 3)[:-1] + b"\x00"
    raises(FrameError, 501, open_peer.feed, data + body_frame(1, b"abc"))


def test_send_heartbeat_queues_the_heartbeat_frame(open_peer):
    open_peer.conn.send_heartbeat()
    assert open_peer.conn.has_output
    assert b"".join(open_peer.conn.data_to_send()) == HEARTBEAT_FRAME
    assert not open_peer.conn.has_output


# --- fuzzing -------------------------------------------------------------------------------

METHOD_IDS = sorted(spec.METHODS)
CHANNEL_METHODS = sorted((c for c in spec.METHODS.values() if c.CLASS_ID != 10), key=lambda c: c.INDEX)
FUZZ_CHANNELS = st.one_of(st.just(1), st.just(1), st.just(1), st.sampled_from([0, 2, 16, 17, 65535]))


def _method_payload():
    valid = st.sampled_from(CHANNEL_METHODS).map(lambda c: c().encode())
    ids_and_noise = st.tuples(st.sampled_from(METHOD_IDS), st.binary(max_size=24)).map(
        lambda t: struct.pack(">I", t[0]) + t[1])
    return st.one_of(valid, valid, ids_and_noise, st.binary(max_size=12))


fuzz_frame = st.one_of(
    st.tuples(st.just(FRAME_METHOD), FUZZ_CHANNELS, _method_payload()),
    st.tuples(st.just(FRAME_HEADER), FUZZ_CHANNELS,
              st.one_of(st.tuples(st.integers(0, 70), st.integers(0, 200), st.binary(max_size=8)).map(
                  lambda t: header_payload(60 if t[0] < 60 else t[0], t[1], b"\x00\x00" + t[2])),
                  st.binary(max_size=20))),
    st.tuples(st.just(FRAME_BODY), FUZZ_CHANNELS, st.binary(max_size=40)),
    st.tuples(st.sampled_from([FRAME_HEARTBEAT, 0, 4, 7, 9, 255]), FUZZ_CHANNELS, st.binary(max_size=4)),
).map(lambda t: frame(*t))


@st.composite
def fuzz_content(draw):
    """A publish on channel 1 with a header and body frames, mostly consistent, sometimes not."""
    body = draw(st.binary(max_size=60))
    declared = draw(st.one_of(st.just(len(body)), st.just(len(body)), st.integers(0, 80)))
    props = draw(st.one_of(st.just(b"\x00\x00"), st.binary(max_size=10)))
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
    chunks = [body[a:b] for a, b in zip([0] + cuts, cuts + [len(body)])]
    return (mframe(1, spec.BasicPublish(exchange="ex", routing_key="k")) + header_frame(1, declared, props)
            + b"".join(body_frame(1, c) for c in chunks if c or draw(st.booleans())))


fuzz_piece = st.one_of(fuzz_frame, fuzz_frame, fuzz_content(), fuzz_content(),
                       st.binary(min_size=1, max_size=16), st.just(HEARTBEAT_FRAME))


def drive_until_error(conn: ServerConnection, chunks: list) -> None:
    """Feed chunks; after each, take events until None. Stop at the first AMQPError."""
    for chunk in chunks:
        conn.receive_data(chunk)
        while True:
            try:
                event = conn.next_event()
            except AMQPError:
                return
            if event is None:
                break
            # every event type the connection yields (a run of acks is one Acks, of publishes one Publishes)
            assert isinstance(event, (Method, Content, Publishes, Acks, ChannelOpened, ChannelClosed, ConnectionClosed))


def _chunked(data: bytes, cuts: list) -> list:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0] + points, points + [len(data)]) if b > a]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(fuzz_piece, max_size=12), st.lists(st.integers(0, 10_000), max_size=6))
@example(pieces=[frame(1, 1, b"\x00<\x00P" + bytes(9))] * 2, cuts=[])  # two basic.ack: one Acks (session 14)
def test_arbitrary_input_after_the_handshake_raises_only_amqp_errors(pieces, cuts):
    p = Peer(frame_max=4096, channel_max=16)
    p.handshake(channel_max=16, frame_max=4096)
    p.open_channel(1)
    data = b"".join(pieces)
    drive_until_error(p.conn, _chunked(data, cuts))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_octets_after_the_handshake_raise_only_amqp_errors(data):
    p = Peer(frame_max=4096, channel_max=16)
    p.handshake(channel_max=16, frame_max=4096)
    p.open_channel(1)
    drive_until_error(p.conn, [data])


@settings(max_examples=200, deadline=None)
@given(st.lists(fuzz_piece, max_size=8))
def test_arbitrary_input_during_the_handshake_raises_only_amqp_errors(pieces):
    p = Peer()
    drive_until_error(p.conn, [b"".join(pieces)])


# --- runs taken from a read that found the broker behind (backlog_read) -----------------------

def _backlog_publishes(n: int) -> bytes:
    """n publishes to one queue, each with its own message-id: about 60 octets each."""
    m = spec.BasicPublish(exchange="", routing_key="q")
    return b"".join(mframe(1, m) + header_frame(1, 2, b"\x00\x80" + bytes((len(b"%d" % i),)) + b"%d" % i)
                    + body_frame(1, b"%02d" % (i % 100)) for i in range(n))


def _as_contents(events: list) -> list:
    """(channel, method, properties, body) of each message, whether it came alone or in a run."""
    out = []
    for e in events:
        if isinstance(e, Publishes):
            out += [(e.channel, e.method, p, bytes(b)) for p, b in zip(e.properties, e.bodies)]
        else:
            assert isinstance(e, Content)
            out.append((e.channel, e.method, e.properties, bytes(e.body)))
    return out


@pytest.mark.parametrize("backlog_read", [connection_module.BACKLOG_READ, 0])
def test_a_read_that_found_the_broker_behind_is_taken_in_runs(publish_path, backlog_read):
    """A connection that never asked for runs (publish_run_max 1: no confirms) gets them for the
    publishes of a read of BACKLOG_READ octets or more, where the broker is behind its publisher;
    a short read after it is taken one by one again, and backlog_read 0 (--no-publish-runs)
    turns it off. The messages are the same either way."""
    p = Peer()
    p.handshake()
    p.open_channel(1)
    p.conn.backlog_read = backlog_read
    big = _backlog_publishes(1500)
    assert len(big) >= connection_module.BACKLOG_READ
    events = p.feed(big)
    runs = publish_path == "compiled" and backlog_read > 0
    assert any(isinstance(e, Publishes) for e in events) == runs
    if runs:  # a run is never longer than PUBLISH_RUN_MAX
        assert max(len(e.bodies) for e in events) == connection_module.PUBLISH_RUN_MAX
    assert _as_contents(events) == _as_contents(_one_by_one(big))
    small = p.feed(_backlog_publishes(20))
    assert [type(e) for e in small] == [Content] * 20


def _one_by_one(data: bytes) -> list:
    """The events of a connection with runs off, fed data whole."""
    p = Peer()
    p.handshake()
    p.open_channel(1)
    p.conn.backlog_read = 0
    return p.feed(data)


def test_runs_from_a_backlog_read_wait_until_the_broker_is_behind_two_connections(publish_path):
    """With the server's shared ``backlogged`` set, a backlog read takes runs only once the
    broker is behind BACKLOG_PEERS connections at once: one flooding publisher alone keeps lone
    publishes (docs/performance.md, "The two-publisher rows"); the server empties the set every
    BACKLOG_WINDOW seconds, and a connection still behind adds itself with its next large read."""
    if publish_path != "compiled":
        pytest.skip("runs are taken by the compiled take_publishes only")
    behind: set = set()
    a, b = Peer(), Peer()
    for p in (a, b):
        p.handshake()
        p.open_channel(1)
        p.conn.backlogged = behind
    big = _backlog_publishes(1500)

    def kinds(p: Peer) -> set:
        return {type(e) for e in p.feed(big)}

    assert kinds(a) == {Content} and behind == {a.conn}  # behind a alone
    assert kinds(b) == {Publishes} and behind == {a.conn, b.conn}
    assert kinds(a) == {Publishes}
    behind.clear()  # the server, every BACKLOG_WINDOW seconds
    assert kinds(a) == {Content}
    assert kinds(b) == {Publishes}
