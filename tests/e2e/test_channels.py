"""Channel lifecycle over real TCP: opening, closing, reuse, flow, and channel-number errors.
RabbitMQ 3.10 is the reference (WARREN_TEST_BROKER_URL)."""

from __future__ import annotations

import time

import pika
import pika.exceptions
import pytest

from . import rawamqp as raw
from .helpers import params

pytestmark = pytest.mark.timeout(30)


def test_many_channels_can_be_opened_and_closed_on_one_connection(broker):
    conn = pika.BlockingConnection(params(broker))
    try:
        for _round in range(2):  # the second round reuses the freed channel numbers
            channels = [conn.channel() for _ in range(100)]
            assert len({ch.channel_number for ch in channels}) == 100
            for ch in channels:
                ch.close()
            assert all(ch.is_closed for ch in channels)
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"after many channels")
        deadline = time.monotonic() + 5
        while True:
            method, _props, body = ch.basic_get(q, auto_ack=True)
            if method is not None:
                break
            assert time.monotonic() < deadline
        assert body == b"after many channels"
    finally:
        conn.close()


def test_pipelined_channel_opens_are_all_answered(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.send(b"".join(raw.channel_open(n) for n in range(1, 201)))
        opened = set()
        for _ in range(200):
            f = c.read_method()
            assert f.method == raw.CHANNEL_OPEN_OK, f
            opened.add(f.channel)
        assert opened == set(range(1, 201))
        c.send(b"".join(raw.channel_close(n) for n in range(1, 201)))
        closed = set()
        for _ in range(200):
            f = c.read_method()
            assert f.method == raw.CHANNEL_CLOSE_OK, f
            closed.add(f.channel)
        assert closed == set(range(1, 201))
        c.close_connection()


def test_closed_channel_number_can_be_reopened(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.channel_close(1))
        c.expect(raw.CHANNEL_CLOSE_OK, channel=1)
        c.open_channel(1)
        c.declare_queue(1, "", exclusive=True)
        c.close_connection()


def test_closing_one_channel_leaves_other_channels_working(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.open_channel(2)
        c.send(raw.channel_close(1))
        c.expect(raw.CHANNEL_CLOSE_OK, channel=1)
        c.declare_queue(2, "", exclusive=True)
        c.close_connection()


def test_server_confirms_channel_flow_active(broker):
    conn = pika.BlockingConnection(params(broker))
    try:
        ch = conn.channel()
        assert ch.flow(True) is True
        ch.queue_declare("", exclusive=True)  # channel still usable
    finally:
        conn.close()


def test_channel_flow_stop_either_pauses_deliveries_or_is_refused_as_not_implemented(broker):
    """The spec lets a client pause deliveries with channel.flow(active=false).

    RabbitMQ does not implement that direction: it closes the connection with 540
    NOT_IMPLEMENTED (class 20, method 20). Either behaviour is acceptable; if the server does
    answer flow-ok(active=false) it must then really hold back deliveries until flow resumes.
    """
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.open_channel(2)
        q, _, _ = c.declare_queue(1, "", exclusive=True)
        c.send(raw.basic_consume(1, q, consumer_tag="flow-test", no_ack=True))
        c.expect(raw.BASIC_CONSUME_OK, channel=1)
        c.send(raw.channel_flow(1, False))
        f = c.read_method()
        if f.method == raw.CONNECTION_CLOSE:
            close = raw.parse_close(f)
            assert (close.reply_code, close.failing_method) == (540, raw.CHANNEL_FLOW)
            c.send(raw.connection_close_ok())
            return
        assert (f.channel, f.method, f.args) == (1, raw.CHANNEL_FLOW_OK, b"\x00")
        c.send(raw.publish_frames(2, "", q, b"held back"))
        try:
            f = c.read_frame(timeout=0.7)
            raise AssertionError(f"server sent {f} while flow was stopped")
        except TimeoutError:
            pass
        c.send(raw.channel_flow(1, True))
        frames = []
        deadline = time.monotonic() + 5
        while not any(fr.is_method and fr.method == raw.BASIC_DELIVER for fr in frames):
            frames.append(c.read_frame(timeout=max(0.0, deadline - time.monotonic())))
        assert any(fr.is_method and fr.method == raw.CHANNEL_FLOW_OK and fr.args == b"\x01"
                   for fr in frames)


def test_method_on_never_opened_channel_closes_connection_with_channel_error(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.send(raw.queue_declare(5, "", exclusive=True))
        close = c.expect_connection_close()
        assert close.channel == 0
        assert (close.reply_code, close.failing_method) == (504, raw.QUEUE_DECLARE)
        c.assert_closed_by_server(timeout=5)


def test_method_on_closed_channel_closes_connection_with_channel_error(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.channel_close(1))
        c.expect(raw.CHANNEL_CLOSE_OK, channel=1)
        c.send(raw.queue_declare(1, "", exclusive=True))
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (504, raw.QUEUE_DECLARE)


def test_opening_an_already_open_channel_closes_connection_with_channel_error(broker):
    # RabbitMQ: connection.close 504 "CHANNEL_ERROR - second 'channel.open' seen", 20/10.
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.channel_open(1))
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (504, raw.CHANNEL_OPEN)
        c.assert_closed_by_server(timeout=5)


@pytest.mark.parametrize("frame,method", [
    (raw.channel_open(0), raw.CHANNEL_OPEN),
    (raw.queue_declare(0, "", exclusive=True), raw.QUEUE_DECLARE),
], ids=["channel.open", "queue.declare"])
def test_non_connection_method_on_channel_zero_closes_connection_with_channel_error(broker, frame, method):
    # RabbitMQ: 504 "CHANNEL_ERROR - unexpected method in connection state running".
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.send(frame)
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (504, method)


@pytest.mark.parametrize("channel_max,channel", [(10, 11), (10, 2000), (None, 2048), (None, 65535)])
def test_channel_number_above_negotiated_channel_max_opens(broker, channel_max, channel):
    # RabbitMQ: channel-max limits how many channels are open, not their numbers (aiormq
    # opens 65535); channel_max=None: the client accepts the server's proposal (2047).
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(channel_max=channel_max)
        c.open_channel(channel)
        c.declare_queue(channel, "", exclusive=True)
        c.close_connection()


def test_more_open_channels_than_channel_max_closes_connection_with_530(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(channel_max=3)
        for n in (3, 900, 65535):
            c.open_channel(n)
        c.send(raw.channel_open(1))
        close = c.expect_connection_close(timeout=3)
        assert (close.channel, close.reply_code, close.failing_method) == (0, 530, (0, 0))
        assert close.reply_text == ("NOT_ALLOWED - number of channels opened (3) has reached the "
                                    "negotiated channel_max (3)")
