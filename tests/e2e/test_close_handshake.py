"""The connection close handshake with frames still in flight (issue 12 point 1), raw sockets.

RabbitMQ's reader, which Warren follows: after close-ok for the client's connection.close it
keeps reading and discarding what the client still sends (a repeated close gets close-ok
again) until the client closes its end; after its own connection.close it discards
everything but close/close-ok until the client answers, then closes the socket. Both waits
end after the negotiated heartbeat interval (30 s without heartbeats). Node's amqplib, which
writes buffered publishes behind its close, is driven in test_node_amqplib.py.
"""

from __future__ import annotations

import signal
import time

from . import rawamqp as raw
from .helpers import connect

BURST = b"".join(raw.publish_frames(1, "", "nowhere", b"x" * 512) for _ in range(2000))  # ~1.2 MB


def still_open(c: raw.RawConnection, seconds: float) -> bytes:
    """Whatever arrives within ``seconds``; raises AssertionError if the server closes the socket."""
    try:
        return c.read_until_eof(timeout=seconds) + b"EOF"
    except TimeoutError:
        out, c.buf = c.buf, b""
        return out


def frames_until(c: raw.RawConnection, method: tuple[int, int], timeout: float) -> list[raw.Frame]:
    got = []
    deadline = time.monotonic() + timeout
    while True:
        f = c.read_frame(max(0.0, deadline - time.monotonic()))
        got.append(f)
        if f.is_method and f.method == method:
            return got


def seconds_until_eof(c: raw.RawConnection, limit: float) -> float:
    started = time.monotonic()
    try:
        c.read_until_eof(timeout=limit)
    except TimeoutError:
        raise AssertionError(f"the server kept the socket open more than {limit}s") from None
    return time.monotonic() - started


def test_frames_behind_the_clients_close_are_discarded_until_the_client_closes(broker, cleanup, uid):
    q = f"close-inflight-{uid}"
    cleanup["queues"].append(q)
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.declare_queue(1, q)
        c.send(raw.connection_close())
        c.expect(raw.CONNECTION_CLOSE_OK, 0)
        # what a client still had buffered: publishes to the queue, methods that expect answers
        in_flight = b"".join(raw.publish_frames(1, "", q, b"late") for _ in range(500))
        c.send(in_flight + BURST + raw.queue_declare(1, "", exclusive=True) + raw.basic_get(1, q))
        assert still_open(c, 0.5) == b""  # nothing answered, the socket stays open for the client
        c.send(raw.connection_close())  # a repeated close is answered with close-ok again
        got = frames_until(c, raw.CONNECTION_CLOSE_OK, 5)
        assert all(f.type == raw.FRAME_HEARTBEAT or f.method == raw.CONNECTION_CLOSE_OK for f in got), got
    conn = connect(broker)
    try:
        assert conn.channel().queue_declare(q, passive=True).method.message_count == 0  # none was routed
    finally:
        conn.close()


def test_the_wait_for_the_client_to_close_ends_after_the_heartbeat_interval(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=1)
        c.send(raw.connection_close())
        c.expect(raw.CONNECTION_CLOSE_OK, 0)
        assert 0.5 < seconds_until_eof(c, 10) < 6


def test_after_the_servers_close_only_close_ok_counts_then_the_socket_closes(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send(raw.channel_open(1))  # 504 CHANNEL_ERROR: the server closes the connection
        close = c.expect_connection_close(reply=False)
        assert close.reply_code == 504
        c.send(BURST + raw.channel_open(2) + raw.queue_declare(1, "", exclusive=True))
        assert still_open(c, 0.5) == b""  # discarded, and the server waits for close-ok
        c.send(raw.connection_close_ok())
        assert seconds_until_eof(c, 5) < 5  # then it closes the socket at once


def test_a_server_close_nobody_answers_ends_after_the_heartbeat_interval(broker):
    with raw.RawConnection(broker.host, broker.port) as c:
        c.handshake(heartbeat=1)
        c.open_channel(1)
        c.send(raw.channel_open(1))
        assert c.expect_connection_close(reply=False).reply_code == 504
        assert seconds_until_eof(c, 10) < 6


def test_shutdown_reads_past_a_clients_publishes_in_flight_to_its_close_ok(start_broker):
    b = start_broker()
    with raw.RawConnection(b.host, b.port) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        b.signal(signal.SIGTERM)
        assert c.expect_connection_close(timeout=5, reply=False).reply_code == 320
        c.send(BURST + raw.connection_close_ok())
        assert seconds_until_eof(c, 5) < 5
    assert b.wait(timeout=10) == 0
