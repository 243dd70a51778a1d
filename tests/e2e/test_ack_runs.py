"""Acks that arrive together: a consumer acking one message at a time sends one basic.ack frame
per message, and the broker takes consecutive ones of a channel as one event
(``warren/codec/acks.py``, ``BrokerChannel.ack_run``). Whatever the run, each ack must end as
if it came alone: the messages gone (from disk too for persistent ones), an unknown tag in the
middle refusing the channel after the acks before it and requeueing the rest, a transaction
holding them until its commit.

The acks are sent by the raw client in one write, so they reach the broker in one read and form
runs; pika publishes and checks. RabbitMQ is the reference (WARREN_TEST_BROKER_URL).
"""

from __future__ import annotations

import struct

import pika
import pytest

from . import rawamqp as raw
from .helpers import PRECONDITION_FAILED, connect, make_queue, message_count, publish_n, wait_until

pytestmark = pytest.mark.timeout(90)

BASIC_QOS, BASIC_QOS_OK = (60, 10), (60, 11)
BASIC_CONSUME_OK, BASIC_DELIVER = (60, 21), (60, 60)
TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK = (90, 10), (90, 11), (90, 20), (90, 21)


def consume(c: raw.RawConnection, queue: str, n: int, prefetch: int = 0) -> list[tuple[int, bytes]]:
    """Subscribe with manual acks and read n deliveries: (delivery tag, body) each."""
    c.send_method(1, *BASIC_QOS, struct.pack(">IHB", 0, prefetch, 0))
    c.expect(BASIC_QOS_OK, 1)
    c.send(raw.basic_consume(1, queue, "ctag", no_ack=False))
    c.expect(BASIC_CONSUME_OK, 1)
    out = []
    while len(out) < n:
        f = c.read_method(timeout=20)
        assert f.method == BASIC_DELIVER, f"expected basic.deliver, got {f}"
        tag, = struct.unpack_from(">Q", f.args, 1 + f.args[0])  # after the consumer tag
        c.read_frame(timeout=20)  # the content header
        out.append((tag, c.read_frame(timeout=20).payload))
    return out


def test_a_run_of_single_acks_settles_every_message(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ack-runs-{uid}")
    n = 500
    publish_n(ch, q, n)
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        got = consume(c, q, n)
        c.send(b"".join(raw.basic_ack(1, tag) for tag, _ in got))
        # the channel is still fine: a round trip on it, then nothing was requeued by the close
        c.send_method(1, *BASIC_QOS, struct.pack(">IHB", 0, 10, 0))
        c.expect(BASIC_QOS_OK, 1)
        c.close_connection()
    assert len({tag for tag, _ in got}) == n
    assert wait_until(lambda: message_count(ch.connection, q) == 0, timeout=10)


def test_an_unknown_tag_in_a_run_refuses_the_channel_after_the_acks_before_it(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ack-runs-bad-{uid}")
    publish_n(ch, q, 10)
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        got = consume(c, q, 10)
        tags = [tag for tag, _ in got]
        acks = [raw.basic_ack(1, t) for t in tags[:4]] + [raw.basic_ack(1, 999)] + [raw.basic_ack(1, t) for t in tags[4:]]
        c.send(b"".join(acks))
        close = c.expect_channel_close(1, timeout=20)
        assert close.reply_code == PRECONDITION_FAILED and close.failing_method == raw.BASIC_ACK
        c.open_channel(1)  # the connection is fine
        c.close_connection()
    # the four acked before the bad tag are gone; the six after it were never acked: requeued
    assert wait_until(lambda: message_count(ch.connection, q) == 6, timeout=10)


def test_a_run_of_acks_in_a_transaction_waits_for_the_commit(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ack-runs-tx-{uid}")
    publish_n(ch, q, 50)
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send_method(1, *TX_SELECT)
        c.expect(TX_SELECT_OK, 1)
        got = consume(c, q, 50)
        c.send(b"".join(raw.basic_ack(1, tag) for tag, _ in got[:30]))
        c.send_method(1, *TX_COMMIT)
        c.expect(TX_COMMIT_OK, 1)
        c.send(b"".join(raw.basic_ack(1, tag) for tag, _ in got[30:]))  # not committed: undone by the close
        c.close_connection()
    assert wait_until(lambda: message_count(ch.connection, q) == 20, timeout=10)


def test_persistent_messages_acked_in_runs_stay_gone_after_a_kill(start_broker, tmp_path):
    """A durable queue, persistent messages confirmed to pika, 300 of 400 acked in one write by a
    raw consumer; kill -9; after the restart exactly the 100 unacked ones are there."""
    data = tmp_path / "data"
    b = start_broker(data_dir=data)
    conn = connect(b)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare("ack-runs-durable", durable=True)
    persistent = pika.BasicProperties(delivery_mode=2)
    for i in range(400):
        ch.basic_publish("", "ack-runs-durable", b"m%d" % i, persistent)
    with raw.RawConnection(b.host, b.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        got = consume(c, "ack-runs-durable", 400)
        c.send(b"".join(raw.basic_ack(1, tag) for tag, _ in got[:300]))
        c.send_method(1, *BASIC_QOS, struct.pack(">IHB", 0, 0, 0))  # a round trip: the acks were read
        c.expect(BASIC_QOS_OK, 1)
        b.proc.kill()  # kill -9 with the consumer's 100 others unacked
        b.proc.wait(20)
    b = start_broker(data_dir=data)
    conn2 = connect(b)
    try:
        ch2 = conn2.channel()
        assert ch2.queue_declare("ack-runs-durable", durable=True, passive=True).method.message_count == 100
        bodies = []
        for _ in range(100):
            _, _, body = ch2.basic_get("ack-runs-durable", auto_ack=True)
            bodies.append(body)
        assert bodies == [body for _, body in got[300:]]
    finally:
        conn2.close()
