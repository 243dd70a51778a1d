"""Error handling over real TCP: soft (channel) errors, hard (connection) errors and
malformed input. RabbitMQ 3.10 is the reference (WARREN_TEST_BROKER_URL).

Every test also checks that the broker as a whole is unharmed: a client that was connected
before the error still completes a publish/get round trip, and a fresh connection works.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pika
import pika.exceptions
import pytest

from . import rawamqp as raw
from .helpers import RABBITMQ, params, round_trip

pytestmark = pytest.mark.timeout(30)


def assert_fresh_connection_works(b) -> None:
    conn = pika.BlockingConnection(params(b))
    try:
        round_trip(conn, b"fresh connection")
    finally:
        conn.close()


@dataclass
class Bystander:
    conn: pika.BlockingConnection

    def assert_works(self) -> None:
        assert self.conn.is_open, "an unrelated client was disconnected by another client's error"
        round_trip(self.conn, b"bystander")


@pytest.fixture
def bystander(broker):
    """A pika client connected (and proven working) before the test provokes an error."""
    conn = pika.BlockingConnection(params(broker))
    round_trip(conn, b"before")
    yield Bystander(conn)
    if conn.is_open:
        conn.close()


# --------------------------------------------------------------------------- soft errors


@dataclass
class SoftCase:
    setup: list  # (frame, expected reply method) sent on channel 1 before the failing method
    failing: bytes  # the method that must be refused, on channel 1
    reply_code: int
    method: tuple[int, int]
    cleanup: list  # frames sent (each answered) on channel 2 afterwards


def soft_cases(uid: str) -> dict[str, SoftCase]:
    missing = f"missing-{uid}"
    x, q = f"x-{uid}", f"q-{uid}"
    return {
        "passive-queue-declare-of-missing-queue": SoftCase(
            [], raw.queue_declare(1, missing, passive=True), 404, raw.QUEUE_DECLARE, []),
        "passive-exchange-declare-of-missing-exchange": SoftCase(
            [], raw.exchange_declare(1, missing, passive=True), 404, raw.EXCHANGE_DECLARE, []),
        "publish-to-missing-exchange": SoftCase(
            [], raw.publish_frames(1, missing, "rk", b"lost"), 404, raw.BASIC_PUBLISH, []),
        "exchange-redeclare-with-other-type": SoftCase(
            [(raw.exchange_declare(1, x, "direct"), raw.EXCHANGE_DECLARE_OK)],
            raw.exchange_declare(1, x, "fanout"), 406, raw.EXCHANGE_DECLARE,
            [(raw.exchange_delete(2, x), raw.EXCHANGE_DELETE_OK)]),
        "queue-redeclare-with-other-durability": SoftCase(
            [(raw.queue_declare(1, q), raw.QUEUE_DECLARE_OK)],
            raw.queue_declare(1, q, durable=True), 406, raw.QUEUE_DECLARE,
            [(raw.queue_delete(2, q), raw.QUEUE_DELETE_OK)]),
        "queue-bind-to-missing-exchange": SoftCase(
            [(raw.queue_declare(1, q, exclusive=True), raw.QUEUE_DECLARE_OK)],
            raw.queue_bind(1, q, missing, "rk"), 404, raw.QUEUE_BIND, []),
        "queue-bind-of-missing-queue": SoftCase(
            [], raw.queue_bind(1, missing, "amq.direct", "rk"), 404, raw.QUEUE_BIND, []),
        "consume-from-missing-queue": SoftCase(
            [], raw.basic_consume(1, missing), 404, raw.BASIC_CONSUME, []),
        "get-from-missing-queue": SoftCase(
            [], raw.basic_get(1, missing), 404, raw.BASIC_GET, []),
        "ack-of-unknown-delivery-tag": SoftCase(
            [], raw.basic_ack(1, 99), 406, raw.BASIC_ACK, []),
        "exchange-declare-with-reserved-amq-prefix": SoftCase(
            [], raw.exchange_declare(1, f"amq.{uid}", "direct"), 403, raw.EXCHANGE_DECLARE, []),
        "queue-declare-with-reserved-amq-prefix": SoftCase(
            [], raw.queue_declare(1, f"amq.{uid}"), 403, raw.QUEUE_DECLARE, []),
        "delete-of-system-exchange-amq-direct": SoftCase(
            [], raw.exchange_delete(1, "amq.direct"), 403, raw.EXCHANGE_DELETE, []),
    }


SOFT_CASE_IDS = list(soft_cases("x"))


@pytest.mark.parametrize("case_id", SOFT_CASE_IDS)
def test_soft_error_closes_only_the_channel_with_reply_code_and_failing_method(
        broker, bystander, uid, case_id):
    case = soft_cases(uid)[case_id]
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.open_channel(3)  # an unrelated channel on the same connection
        for frame, reply in case.setup:
            c.send(frame)
            c.expect(reply, channel=1)
        c.send(case.failing)
        close = c.expect_channel_close(1)
        assert close.reply_code == case.reply_code, close
        assert close.failing_method == case.method, close
        # The connection survives: the other channel works, channel 1 can be reopened.
        c.declare_queue(3, "", exclusive=True)
        c.open_channel(2)
        for frame, reply in case.cleanup:
            c.send(frame)
            c.expect(reply, channel=2)
        c.open_channel(1)
        c.declare_queue(1, "", exclusive=True)
        c.close_connection()
    bystander.assert_works()


def test_server_closes_channel_on_passive_declare_of_missing_queue(broker, bystander, uid):
    conn = pika.BlockingConnection(params(broker))
    try:
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
            ch.queue_declare(f"missing-{uid}", passive=True)
        assert ei.value.reply_code == 404
        assert ch.is_closed and conn.is_open
        round_trip(conn, b"same connection, new channel")
    finally:
        conn.close()
    bystander.assert_works()


def test_server_closes_channel_on_publish_to_missing_exchange(broker, bystander, uid):
    conn = pika.BlockingConnection(params(broker))
    try:
        ch = conn.channel()
        ch.basic_publish(f"missing-{uid}", "rk", b"nowhere to go")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as ei:
            ch.queue_declare("", exclusive=True)  # the close arrives at the next sync call
        assert ei.value.reply_code == 404
        assert conn.is_open
        round_trip(conn, b"same connection, new channel")
    finally:
        conn.close()
    bystander.assert_works()


def test_server_refuses_exclusive_queue_of_another_connection_with_resource_locked(
        broker, bystander, uid):
    name = f"excl-{uid}"
    owner = pika.BlockingConnection(params(broker))
    try:
        owner.channel().queue_declare(name, exclusive=True)
        with raw.RawConnection(broker.host, broker.port) as c:
            c.handshake()
            for n, frame, method in [
                (1, raw.queue_declare(1, name), raw.QUEUE_DECLARE),
                (2, raw.queue_declare(2, name, passive=True), raw.QUEUE_DECLARE),
                (3, raw.basic_consume(3, name), raw.BASIC_CONSUME),
                (4, raw.basic_get(4, name), raw.BASIC_GET),
            ]:
                c.open_channel(n)
                c.send(frame)
                close = c.expect_channel_close(n)
                assert (close.reply_code, close.failing_method) == (405, method), close
            c.close_connection()
        round_trip(owner, b"owner unaffected")
    finally:
        owner.close()
    bystander.assert_works()


# --------------------------------------------------------------------------- hard errors


def test_hard_error_closes_the_whole_pika_connection(broker, bystander, uid):
    # RabbitMQ: unknown exchange type is 503 COMMAND_INVALID, a connection error.
    conn = pika.BlockingConnection(params(broker))
    other_channel = conn.channel()
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as ei:
        ch.exchange_declare(f"x-{uid}", exchange_type=f"no-such-type-{uid}")
    assert ei.value.reply_code == 503
    assert conn.is_closed and other_channel.is_closed
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_unknown_exchange_type_closes_connection_with_command_invalid(broker, bystander, uid):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.exchange_declare(1, f"x-{uid}", f"no-such-type-{uid}"))
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (503, raw.EXCHANGE_DECLARE)
        assert close.channel == 0
        c.assert_closed_by_server(timeout=5)
    bystander.assert_works()


def test_publish_with_immediate_flag_closes_connection_with_not_implemented(broker, bystander):
    # RabbitMQ dropped support for immediate in 3.0: 540 "NOT_IMPLEMENTED - immediate=true".
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        q, _, _ = c.declare_queue(1, "", exclusive=True)
        c.send(raw.publish_frames(1, "", q, b"now or never", immediate=True))
        close = c.expect_connection_close()
        assert (close.reply_code, close.failing_method) == (540, raw.BASIC_PUBLISH)
        assert close.channel == 0
        c.assert_closed_by_server(timeout=5)
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_server_ignores_everything_but_close_ok_after_sending_connection_close(broker):
    """After a hard error the server ignores everything except close/close-ok (spec 2.3.5.2)."""
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        c.send(raw.channel_open(1))  # 504: second channel.open
        close = c.expect_connection_close(reply=False)
        assert close.reply_code == 504
        c.try_send(raw.queue_declare(1, "", exclusive=True))  # must be discarded
        c.try_send(raw.connection_close_ok())
        try:
            rest = c.read_until_eof(timeout=5)
        except TimeoutError:
            raise AssertionError("server did not close the socket after close-ok")
        assert rest == b"", f"server answered after connection.close: {rest!r}"


# --------------------------------------------------------------------------- malformed input


def expect_hard_close(c: raw.RawConnection, timeout: float = 5.0) -> raw.Close:
    """connection.close must arrive on channel 0 and the socket must then be closed (no hang).

    RabbitMQ closes the socket about 3 s after a frame-level error even though the client
    answers close-ok; it must never take longer than that.
    """
    close = c.expect_connection_close(timeout=timeout)
    assert close.channel == 0
    c.assert_closed_by_server(timeout=5)
    return close


def open_raw(broker, **tune) -> raw.RawConnection:
    c = raw.RawConnection(broker.host, broker.port)
    c.handshake(**tune)
    c.open_channel(1)
    return c


def test_bad_frame_end_octet_closes_connection_with_frame_error(broker, bystander):
    with open_raw(broker) as c:
        c.send(raw.frame(raw.FRAME_METHOD, 1, raw.method_payload(*raw.QUEUE_DECLARE, b"\x00" * 9),
                         end=0x00))
        assert expect_hard_close(c).reply_code == 501
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_oversize_frame_header_closes_connection_with_frame_error_without_waiting(broker, bystander):
    with open_raw(broker) as c:
        # Only the 7-byte header announcing 10 MiB: the server must not wait for the payload.
        c.send(struct.pack(">BHI", raw.FRAME_METHOD, 1, 10 * 1024 * 1024))
        assert expect_hard_close(c).reply_code == 501
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_body_frame_above_negotiated_frame_max_closes_connection_with_frame_error(broker, bystander):
    with open_raw(broker, frame_max=4096) as c:
        q, _, _ = c.declare_queue(1, "", exclusive=True)
        body = b"x" * 5000
        c.send(raw.basic_publish(1, "", q) + raw.content_header(1, len(body))
               + raw.body_frame(1, body))
        assert expect_hard_close(c).reply_code == 501
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_unknown_frame_type_closes_connection_with_frame_error(broker, bystander):
    with open_raw(broker) as c:
        c.send(raw.frame(9, 0, b"abc"))
        assert expect_hard_close(c).reply_code == 501
    bystander.assert_works()


def test_heartbeat_on_nonzero_channel_closes_connection(broker, bystander):
    # The spec (4.2.7) asks for 501 FRAME_ERROR; RabbitMQ answers 505 UNEXPECTED_FRAME.
    with open_raw(broker) as c:
        c.send(raw.frame(raw.FRAME_HEARTBEAT, 1, b""))
        assert expect_hard_close(c).reply_code in (501, 505)
    bystander.assert_works()


@pytest.mark.xfail(RABBITMQ, strict=False, reason=(
    "RabbitMQ 3.10 crashes the connection process ({unknown_method_id,{99,1}}) and drops "
    "the socket without connection.close; the spec wants a connection exception with a "
    "reply code, which Warren sends."))
@pytest.mark.parametrize("channel,class_id,method_id", [(1, 99, 1), (1, 50, 99), (0, 10, 99)],
                         ids=["unknown-class", "unknown-queue-method", "unknown-connection-method"])
def test_unknown_class_or_method_closes_connection_with_not_implemented_or_command_invalid(
        broker, bystander, channel, class_id, method_id):
    with open_raw(broker) as c:
        c.send(raw.method_frame(channel, class_id, method_id, b"\x00\x00"))
        close = expect_hard_close(c)
        assert close.reply_code in (540, 503), close  # NOT_IMPLEMENTED or COMMAND_INVALID
    bystander.assert_works()
    assert_fresh_connection_works(broker)


@pytest.mark.parametrize("frames", [
    raw.content_header(1, 5),
    raw.body_frame(1, b"hello"),
    raw.content_header(1, 5) + raw.body_frame(1, b"hello"),
], ids=["header", "body", "header-and-body"])
def test_content_without_preceding_publish_closes_connection_with_unexpected_frame(
        broker, bystander, frames):
    with open_raw(broker) as c:
        c.send(frames)
        assert expect_hard_close(c).reply_code == 505
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_method_frame_where_content_header_expected_closes_connection_with_unexpected_frame(
        broker, bystander):
    with open_raw(broker) as c:
        c.send(raw.basic_publish(1, "", "rk") + raw.queue_declare(1, "", exclusive=True))
        assert expect_hard_close(c).reply_code == 505
    bystander.assert_works()


def test_content_header_of_wrong_class_closes_connection_with_unexpected_frame(broker, bystander):
    with open_raw(broker) as c:
        c.send(raw.basic_publish(1, "", "rk") + raw.content_header(1, 2, class_id=50)
               + raw.body_frame(1, b"hi"))
        assert expect_hard_close(c).reply_code == 505
    bystander.assert_works()


def test_method_frame_truncated_inside_its_arguments_closes_connection_with_frame_error(
        broker, bystander):
    # queue.declare whose frame ends in the middle of the queue name (shortstr says 5 bytes,
    # 3 follow, and the bits and arguments table are missing). RabbitMQ: 501 FRAME_ERROR
    # "cannot decode ...", naming class 50 method 10 (not 502 SYNTAX_ERROR).
    with open_raw(broker) as c:
        c.send(raw.frame(raw.FRAME_METHOD, 1, raw.method_payload(*raw.QUEUE_DECLARE, b"\x00\x00\x05abc")))
        close = expect_hard_close(c)
        assert close.reply_code == 501
        assert close.failing_method == raw.QUEUE_DECLARE
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_method_frame_too_short_for_class_and_method_ids_closes_connection_with_frame_error(
        broker, bystander):
    # RabbitMQ: 501 "FRAME_ERROR - type 1, all octets = <<0,50>>: unknown_frame".
    with open_raw(broker) as c:
        c.send(raw.frame(raw.FRAME_METHOD, 1, b"\x00\x32"))
        assert expect_hard_close(c).reply_code == 501
    bystander.assert_works()


@pytest.mark.xfail(RABBITMQ, strict=False, reason=(
    "RabbitMQ 3.10 does not check that body frames add up to the declared body size: the "
    "surplus makes the remaining size negative and the channel waits forever for more body, "
    "silently swallowing the message. The spec calls this a frame error (501); Warren "
    "reports it."))
@pytest.mark.parametrize("bodies", [[b"0123456789"], [b"012", b"3456"]], ids=["one-frame", "two-frames"])
def test_body_longer_than_declared_size_closes_connection_with_frame_error(broker, bystander, bodies):
    with open_raw(broker) as c:
        q, _, _ = c.declare_queue(1, "", exclusive=True)
        c.send(raw.basic_publish(1, "", q) + raw.content_header(1, 5)
               + b"".join(raw.body_frame(1, b) for b in bodies))
        close = expect_hard_close(c, timeout=3)
        assert close.reply_code == 501
    bystander.assert_works()
    assert_fresh_connection_works(broker)


def test_channel_method_before_handshake_completes_closes_the_connection(broker):
    # RabbitMQ treats any unexpected frame during the handshake as fatal and, as for all
    # handshake failures, drops the socket (about 3 s later) without connection.close.
    # Sending connection.close first is fine too.
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(raw.PROTOCOL_HEADER)
        c.expect(raw.CONNECTION_START)
        c.send(raw.channel_open(1))
        try:
            f = c.read_method(timeout=5)
            assert f.method == raw.CONNECTION_CLOSE, f
        except raw.ConnectionLost:
            return
        c.try_send(raw.connection_close_ok())
        c.assert_closed_by_server(timeout=5)
