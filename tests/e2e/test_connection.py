"""Connection-level behaviour over real TCP: handshake, authentication, tuning, heartbeats,
close and graceful shutdown. RabbitMQ 3.10 is the reference (WARREN_TEST_BROKER_URL)."""

from __future__ import annotations

import os
import signal
import struct
import time

import amqp
import pika
import pika.exceptions
import pytest

from . import rawamqp as raw
from .helpers import params, round_trip

pytestmark = pytest.mark.timeout(30)


# --------------------------------------------------------------------------- handshake


def test_pika_handshake_succeeds_and_server_properties_advertise_capabilities(broker):
    conn = pika.BlockingConnection(params(broker))
    try:
        props = conn._impl.server_properties
        assert isinstance(props.get("product"), (str, bytes)) and props["product"]
        assert isinstance(props.get("version"), (str, bytes)) and props["version"]
        caps = props["capabilities"]
        for cap in ("publisher_confirms", "exchange_exchange_bindings", "basic.nack",
                    "consumer_cancel_notify", "connection.blocked",
                    "authentication_failure_close", "per_consumer_qos", "direct_reply_to"):
            assert caps.get(cap) is True, f"capability {cap} missing: {caps}"
        round_trip(conn)
    finally:
        conn.close()


def test_connection_start_offers_version_0_9_plain_amqplain_and_en_us(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(raw.PROTOCOL_HEADER)
        start = raw.parse_start(c.expect(raw.CONNECTION_START, channel=0))
        assert (start.version_major, start.version_minor) == (0, 9)
        assert "PLAIN" in start.mechanisms and "AMQPLAIN" in start.mechanisms
        assert "en_US" in start.locales
        assert isinstance(start.server_properties["capabilities"], dict)


def test_server_proposes_default_tuning_values(broker):
    # RabbitMQ's defaults, which Warren copies: channel-max 2047, frame-max 128 KiB, heartbeat 60 s.
    with raw.RawConnection(broker.host, broker.port) as c:
        tune = c.handshake()
        assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)


@pytest.mark.parametrize("header", [  # AMQP 0-10 is served: tests/e2e/amqp0_10/test_connection.py
    b"HTTP/1.1",
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
], ids=["http-version", "http-request"])
def test_server_answers_unsupported_protocol_header_with_its_own_and_closes(broker, header):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(header)
        assert c.read_until_eof(timeout=5) == b"AMQP\x00\x00\x09\x01"


def test_server_closes_connection_when_client_sends_garbage_instead_of_header(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(b"\x00\x01\x02\x03\x04\x05\x06\x07")
        data = c.read_until_eof(timeout=5)
        assert data in (b"", b"AMQP\x00\x00\x09\x01")  # RabbitMQ sends its header


# --------------------------------------------------------------------------- authentication


def test_server_refuses_wrong_password_with_access_refused(broker):
    # pika (which announces authentication_failure_close) receives connection.close 403 and
    # wraps it: ProbableAuthenticationError("ConnectionClosedByBroker: (403) 'ACCESS_REFUSED - ...'")
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as ei:
        pika.BlockingConnection(params(broker, credentials=pika.PlainCredentials("guest", "wrong")))
    assert "(403)" in str(ei.value) and "ACCESS_REFUSED" in str(ei.value)


def test_server_sends_connection_close_403_on_failed_plain_login(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(raw.PROTOCOL_HEADER)
        c.expect(raw.CONNECTION_START)
        c.send(raw.start_ok("guest", "not-the-password"))
        close = c.expect_connection_close()
        assert close.reply_code == 403
        assert close.reply_text.startswith("ACCESS_REFUSED")
        c.assert_closed_by_server(timeout=5)


def test_server_refuses_unknown_user(broker, uid):
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as ei:
        pika.BlockingConnection(params(broker, credentials=pika.PlainCredentials(f"nobody-{uid}", "x")))
    assert "(403)" in str(ei.value)


def test_amqplain_login_succeeds(broker):
    conn = amqp.Connection(f"{broker.host}:{broker.port}", userid="guest", password="guest",
                           virtual_host="/", login_method="AMQPLAIN", connect_timeout=5,
                           read_timeout=5, write_timeout=5)
    conn.connect()
    try:
        assert conn.connected
        ch = conn.channel()
        q, _, _ = ch.queue_declare("", exclusive=True)
        ch.basic_publish(amqp.Message(b"via amqplain"), exchange="", routing_key=q)
        deadline = time.monotonic() + 5
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = ch.basic_get(q, no_ack=True)
        assert msg is not None and msg.body == b"via amqplain"
    finally:
        conn.close()


def test_amqplain_login_with_wrong_password_is_refused_with_403(broker):
    conn = amqp.Connection(f"{broker.host}:{broker.port}", userid="guest", password="wrong",
                           login_method="AMQPLAIN", connect_timeout=5, read_timeout=5,
                           write_timeout=5)
    with pytest.raises(amqp.exceptions.AccessRefused) as ei:
        conn.connect()
    assert ei.value.reply_code == 403
    conn.collect()


def test_server_refuses_unknown_vhost_with_not_allowed(broker, uid):
    # pika: ProbableAccessDeniedError("ConnectionClosedByBroker: (530) 'NOT_ALLOWED - vhost ... not found'")
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as ei:
        pika.BlockingConnection(params(broker, virtual_host=f"no-such-vhost-{uid}"))
    assert "(530)" in str(ei.value) and "NOT_ALLOWED" in str(ei.value)


def test_connection_open_of_unknown_vhost_closes_with_530_naming_connection_open(broker, uid):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(open_vhost=False)
        c.send(raw.connection_open(f"no-such-vhost-{uid}"))
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (530, raw.CONNECTION_OPEN)


# --------------------------------------------------------------------------- tuning


def test_server_refuses_channel_beyond_client_requested_channel_max(broker):
    conn = pika.BlockingConnection(params(broker, channel_max=10))
    try:
        channels = [conn.channel() for _ in range(10)]
        assert sorted(ch.channel_number for ch in channels) == list(range(1, 11))
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as ei:
            conn.channel(channel_number=11)
        assert ei.value.reply_code == 530  # NOT_ALLOWED, as RabbitMQ
    finally:
        if conn.is_open:
            conn.close()


def _assert_handshake_refused(c: raw.RawConnection, **tune: int) -> None:
    """Send tune-ok with the given values and connection.open: the server must not open.

    The spec says the server MUST close the connection "without attempting a negotiated
    close" when tune-ok exceeds its proposal; RabbitMQ sends connection.close 530 and drops
    the socket at once (so the client may see either the close or a reset).
    """
    c.handshake(open_vhost=False, **tune)
    c.try_send(raw.connection_open("/"))
    try:
        f = c.read_method(timeout=5)
    except raw.ConnectionLost:
        return
    assert f.method == raw.CONNECTION_CLOSE, f"server accepted tune-ok {tune}: {f}"


@pytest.mark.parametrize("tune", [
    {"channel_max": 2048}, {"channel_max": 0}, {"frame_max": 131073}, {"frame_max": 0},
    {"frame_max": 1024},
], ids=["channel_max-above", "channel_max-unlimited", "frame_max-above", "frame_max-unlimited",
        "frame_max-below-minimum"])
def test_server_refuses_tune_ok_beyond_its_proposal(broker, tune):
    with raw.RawConnection(broker.host, broker.port) as c:
        _assert_handshake_refused(c, **tune)


def test_highest_channel_number_within_channel_max_is_usable(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(channel_max=10)
        c.open_channel(10)
        c.declare_queue(10, "", exclusive=True)
        c.close_connection()


def test_server_proposes_channel_max_from_command_line(start_broker):
    b = start_broker("--channel-max", "5")
    with raw.RawConnection(b.host, b.port) as c:
        tune = c.handshake()
        assert tune.channel_max == 5
        for n in range(1, 6):
            c.open_channel(n)
        c.send(raw.channel_open(6))
        close = c.expect_connection_close()
        assert close.reply_code == 530
    conn = pika.BlockingConnection(params(b))
    try:
        assert conn._impl.params.channel_max == 5
        round_trip(conn)
    finally:
        conn.close()


def _raw_get(c: raw.RawConnection, channel: int, queue: str) -> tuple[bytes, list[int]]:
    """basic.get (no-ack) a message that must be there; returns (body, sizes of body frames)."""
    deadline = time.monotonic() + 5
    while True:
        c.send(raw.basic_get(channel, queue))
        f = c.read_method()
        if f.method == raw.BASIC_GET_OK:
            break
        assert f.method == raw.BASIC_GET_EMPTY, f
        assert time.monotonic() < deadline, "message never arrived"
        time.sleep(0.05)
    header = c.read_frame()
    assert header.type == raw.FRAME_HEADER and header.channel == channel
    body_size = struct.unpack(">Q", header.payload[4:12])[0]
    body, sizes = b"", []
    while len(body) < body_size:
        f = c.read_frame()
        assert f.type == raw.FRAME_BODY and f.channel == channel, f
        sizes.append(len(f.payload))
        body += f.payload
    assert len(body) == body_size
    return body, sizes


def test_server_splits_bodies_to_respect_client_frame_max(broker):
    body = bytes(range(256)) * 64  # 16 KiB, four times the negotiated frame-max
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(frame_max=4096)
        c.open_channel(1)
        q, _, _ = c.declare_queue(1, "", exclusive=True)
        # The client respects frame-max too: four body frames of at most 4088 payload bytes.
        chunks = [body[i:i + 4088] for i in range(0, len(body), 4088)]
        c.send(raw.basic_publish(1, "", q) + raw.content_header(1, len(body))
               + b"".join(raw.body_frame(1, ch) for ch in chunks))
        got, sizes = _raw_get(c, 1, q)
        assert got == body
        assert max(sizes) <= 4096 - 8, sizes
        c.close_connection()


def test_large_message_round_trips_with_small_pika_frame_max(broker):
    conn = pika.BlockingConnection(params(broker, frame_max=4096))
    try:
        assert conn._impl.params.frame_max == 4096
        round_trip(conn, os.urandom(100_000))
    finally:
        conn.close()


def test_server_proposes_frame_max_from_command_line(start_broker):
    b = start_broker("--frame-max", "8192")
    with raw.RawConnection(b.host, b.port) as c:
        tune = c.handshake()
        assert tune.frame_max == 8192
    conn = pika.BlockingConnection(params(b))  # pika asks for 131072 and must get 8192
    try:
        assert conn._impl.params.frame_max == 8192
        round_trip(conn, os.urandom(50_000))
    finally:
        conn.close()
    with raw.RawConnection(b.host, b.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.basic_publish(1, "", "nowhere") + raw.content_header(1, 9000)
               + raw.body_frame(1, b"x" * 9000))
        assert c.expect_connection_close().reply_code == 501  # FRAME_ERROR


# --------------------------------------------------------------------------- heartbeats


def _time_until_server_hangs_up(c: raw.RawConnection, limit: float) -> float:
    """Read (and ignore) frames, never sending anything, until the server closes the socket."""
    t0 = time.monotonic()
    deadline = t0 + limit
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"server did not drop the silent client within {limit}s")
        try:
            c.read_frame(timeout=remaining)
        except raw.ConnectionLost:
            return time.monotonic() - t0
        except TimeoutError:
            continue


def test_server_disconnects_silent_client_after_negotiated_heartbeat(broker):
    # The client picks heartbeat=1 in tune-ok (lower than the server's proposal), then goes
    # silent. RabbitMQ drops it after ~3 s (it closes the socket without connection.close).
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=1)
        c.open_channel(1)
        elapsed = _time_until_server_hangs_up(c, limit=6)
        assert 1.0 <= elapsed <= 4.5, elapsed


def test_server_sends_heartbeats_and_keeps_client_that_sends_heartbeats(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=1)
        received = 0
        t0 = time.monotonic()
        next_beat = t0
        while time.monotonic() - t0 < 3.5:
            if time.monotonic() >= next_beat:
                c.send(raw.heartbeat_frame())
                next_beat += 0.5
            try:
                f = c.read_frame(timeout=0.1)
            except TimeoutError:
                continue
            assert f.type == raw.FRAME_HEARTBEAT and f.channel == 0, f
            received += 1
        assert received >= 2, "server sent no heartbeats at the negotiated 1 s interval"
        c.open_channel(1)  # still connected
        c.close_connection()


def test_server_proposes_heartbeat_from_command_line(start_broker):
    b = start_broker("--heartbeat", "1")
    with raw.RawConnection(b.host, b.port) as c:
        tune = c.handshake()  # accept the server's proposal
        assert tune.heartbeat == 1
        elapsed = _time_until_server_hangs_up(c, limit=6)
        assert 1.0 <= elapsed <= 4.5, elapsed


def test_pika_client_with_one_second_heartbeat_survives_idle_period(broker):
    conn = pika.BlockingConnection(params(broker, heartbeat=1))
    try:
        assert conn._impl.params.heartbeat == 1
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4:
            conn.process_data_events(time_limit=0.5)
        assert conn.is_open
        round_trip(conn)
    finally:
        conn.close()


# --------------------------------------------------------------------------- closing


def test_client_initiated_close_is_answered_with_close_ok(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.open_channel(2)
        c.send(raw.connection_close(200, "client done"))
        f = c.read_method()
        assert (f.channel, f.method) == (0, raw.CONNECTION_CLOSE_OK)
        # RabbitMQ leaves it to the client to close the socket after close-ok, so only
        # check that nothing but EOF (or silence) follows.
        try:
            rest = c.read_until_eof(timeout=0.5)
        except TimeoutError:
            rest = b""
        assert rest == b""


def test_pika_close_completes_cleanly(broker):
    conn = pika.BlockingConnection(params(broker))
    ch = conn.channel()
    ch.queue_declare("", exclusive=True)
    conn.close()
    assert conn.is_closed and ch.is_closed


def test_exclusive_queue_disappears_when_its_connection_closes(broker, uid):
    name = f"excl-{uid}"
    conn = pika.BlockingConnection(params(broker))
    conn.channel().queue_declare(name, exclusive=True)
    conn.close()
    other = pika.BlockingConnection(params(broker))
    try:
        ch = other.channel()
        deadline = time.monotonic() + 5
        while True:
            try:
                ch.queue_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                assert e.reply_code == 404
                break
            assert time.monotonic() < deadline, "exclusive queue survived its connection"
            time.sleep(0.1)
    finally:
        other.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_graceful_shutdown_closes_clients_with_connection_forced_and_exits_zero(start_broker, sig):
    b = start_broker()
    conn = pika.BlockingConnection(params(b))
    round_trip(conn)
    with raw.RawConnection(b.host, b.port) as c:
        c.handshake()
        c.open_channel(1)
        b.signal(sig)
        close = c.expect_connection_close(timeout=5)
        assert close.reply_code == 320  # CONNECTION_FORCED
        assert close.channel == 0
    deadline = time.monotonic() + 5
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as ei:
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.2)
    assert ei.value.reply_code == 320
    assert b.wait(timeout=5) == 0
