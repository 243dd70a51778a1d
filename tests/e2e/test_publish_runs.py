"""Publishes that arrive together: the broker takes a run of consecutive basic.publish contents
with the same method (one channel, exchange, routing key, flags) as one event and handles it
with one exchange lookup and permission check (``ServerConnection.publish_run_max``,
``BrokerChannel.publish_run``). Whatever the run, each message must end as if published alone:
in order, with its own properties, confirmed, returned, held by a transaction, and an error in
the middle of a run stops it exactly there.

The publishes are sent by the raw client in one write, so they reach the broker in one read
and form runs (on a connection with a confirming channel: ``take_runs``); pika reads the results. RabbitMQ is the reference (WARREN_TEST_BROKER_URL).
"""

from __future__ import annotations

import struct
import threading
import time

import pytest

from . import rawamqp as raw
from .helpers import PRECONDITION_FAILED, connect, get, make_queue, message_count, wait_until

pytestmark = pytest.mark.timeout(60)

CONFIRM_SELECT, CONFIRM_SELECT_OK = (85, 10), (85, 11)
TX_SELECT, TX_SELECT_OK, TX_COMMIT, TX_COMMIT_OK = (90, 10), (90, 11), (90, 20), (90, 21)
TX_ROLLBACK, TX_ROLLBACK_OK = (90, 30), (90, 31)
BASIC_RETURN = (60, 50)
MESSAGE_ID, USER_ID = 0x0080, 0x0010  # basic property flags


def publish(channel: int, routing_key: str, body: bytes, flags: int = 0, values: bytes = b"",
            exchange: str = "", mandatory: bool = False) -> bytes:
    """basic.publish + a content header with these property flags and values + the body."""
    header = raw.frame(raw.FRAME_HEADER, channel, struct.pack(">HHQH", 60, 0, len(body), flags) + values)
    return (raw.basic_publish(channel, exchange, routing_key, mandatory) + header
            + (raw.body_frame(channel, body) if body else b""))


def with_message_id(channel: int, routing_key: str, i: int, **kw) -> bytes:
    return publish(channel, routing_key, b"body-%d" % i, MESSAGE_ID, raw.shortstr(f"id-{i}"), **kw)


def take_runs(c: raw.RawConnection) -> None:
    """Put channel 2 in confirm mode: Warren then takes runs on every channel of the connection
    (by default only confirming connections get runs, adapter.py); channel 1 stays plain."""
    c.open_channel(2)
    c.send_method(2, *CONFIRM_SELECT, b"\x00")
    c.expect(CONFIRM_SELECT_OK, 2)


def acked_upto(c: raw.RawConnection, n: int, channel: int = 1) -> int:
    """Read confirms until publish n is covered; the highest tag acked (no nack may come)."""
    upto = 0
    while upto < n:
        f = c.read_method(timeout=20)
        assert f.method == raw.BASIC_ACK and f.channel == channel, f"expected basic.ack, got {f}"
        tag, = struct.unpack_from(">Q", f.args)
        assert tag > upto
        upto = tag
    return upto


def test_a_run_of_publishes_with_their_own_properties_is_confirmed_and_queued_in_order(broker, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"runs-order-{uid}")
    n = 600
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send_method(1, *CONFIRM_SELECT, b"\x00")
        c.expect(CONFIRM_SELECT_OK, 1)
        c.send(b"".join(with_message_id(1, q, i) for i in range(n)))
        assert acked_upto(c, n) == n
        c.close_connection()
    assert message_count(ch.connection, q) == n
    for i in range(n):
        method, props, body = get(ch, q)
        assert (body, props.message_id) == (b"body-%d" % i, f"id-{i}")


def test_an_error_in_the_middle_of_a_run_stops_it_there(broker, ch, cleanup, uid):
    """Message 6 of 10 claims another user: 406 closes the channel; 1-5 are queued, 7-10 dropped
    (frames after a channel error are discarded, as RabbitMQ does)."""
    q = make_queue(ch, cleanup, f"runs-error-{uid}")
    frames = [with_message_id(1, q, i) for i in range(5)]
    frames.append(publish(1, q, b"impostor", USER_ID, raw.shortstr("not-guest")))
    frames += [with_message_id(1, q, i) for i in range(6, 10)]
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        take_runs(c)
        c.send(b"".join(frames))
        close = c.expect_channel_close(1, timeout=20)
        assert close.reply_code == PRECONDITION_FAILED
        c.open_channel(1)  # the connection is fine
        c.close_connection()
    assert wait_until(lambda: message_count(ch.connection, q) == 5, timeout=10)
    assert [get(ch, q)[2] for _ in range(5)] == [b"body-%d" % i for i in range(5)]
    assert message_count(ch.connection, q) == 0


def test_a_run_of_unroutable_mandatory_publishes_returns_each_and_confirms_them_all(broker, uid):
    n = 40
    nowhere = f"runs-nowhere-{uid}"
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send_method(1, *CONFIRM_SELECT, b"\x00")
        c.expect(CONFIRM_SELECT_OK, 1)
        c.send(b"".join(with_message_id(1, nowhere, i, mandatory=True) for i in range(n)))
        returned, upto = [], 0
        while upto < n or len(returned) < n:
            f = c.read_method(timeout=20)
            if f.method == BASIC_RETURN:
                reply_code, = struct.unpack_from(">H", f.args)
                assert reply_code == 312
                c.read_frame(timeout=20)  # the content header
                returned.append(c.read_frame(timeout=20).payload)
            else:
                assert f.method == raw.BASIC_ACK, f"expected basic.ack or basic.return, got {f}"
                assert len(returned) >= struct.unpack_from(">Q", f.args)[0]  # the return comes first
                upto = struct.unpack_from(">Q", f.args)[0]
        c.close_connection()
    assert returned == [b"body-%d" % i for i in range(n)]


@pytest.mark.parametrize("ending", ["commit", "rollback"])
def test_a_run_inside_a_transaction_waits_for_the_commit(broker, ch, cleanup, uid, ending):
    q = make_queue(ch, cleanup, f"runs-tx-{uid}")
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        take_runs(c)
        c.send_method(1, *TX_SELECT)
        c.expect(TX_SELECT_OK, 1)
        c.send(b"".join(with_message_id(1, q, i) for i in range(50)))
        # the publishes are handled before the next method (one channel, in order)
        c.declare_queue(1, q, passive=True)
        assert message_count(ch.connection, q) == 0
        if ending == "commit":
            c.send_method(1, *TX_COMMIT)
            c.expect(TX_COMMIT_OK, 1)
        else:
            c.send_method(1, *TX_ROLLBACK)
            c.expect(TX_ROLLBACK_OK, 1)
        c.close_connection()
    assert message_count(ch.connection, q) == (50 if ending == "commit" else 0)


def test_a_run_through_an_exchange_reaches_every_bound_queue_and_cc_headers_add_theirs(broker, ch, cleanup, uid):
    """The run is routed once for messages that route by key alone; one whose headers name
    more keys (CC) in the middle of it still reaches those queues too."""
    ex = f"runs-ex-{uid}"
    ch.exchange_declare(ex, "direct")
    cleanup["exchanges"].append(ex)
    a, b, c = (make_queue(ch, cleanup, f"runs-{n}-{uid}") for n in "abc")
    ch.queue_bind(a, ex, "main")
    ch.queue_bind(b, ex, "main")
    ch.queue_bind(c, ex, "side")
    array = b"S" + raw.longstr("side")
    entries = raw.shortstr("CC") + b"A" + struct.pack(">I", len(array)) + array
    cc = struct.pack(">I", len(entries)) + entries  # headers {"CC": ["side"]}
    frames = [publish(1, "main", b"m%d" % i, exchange=ex) for i in range(10)]
    frames[4] = publish(1, "main", b"cc", 0x2000, cc, exchange=ex)  # headers: CC side
    with raw.RawConnection(broker.host, broker.port, timeout=20) as conn:
        conn.handshake(heartbeat=0)
        conn.open_channel(1)
        take_runs(conn)
        conn.send(b"".join(frames))
        conn.declare_queue(1, a, passive=True)  # after the publishes, on the same channel
        conn.close_connection()
    expected = [b"m%d" % i for i in range(10)]
    expected[4] = b"cc"
    for q in (a, b):
        assert [get(ch, q)[2] for _ in range(10)] == expected
    assert get(ch, c)[2] == b"cc" and message_count(ch.connection, c) == 0


def test_publishes_written_one_at_a_time_are_each_handled_before_the_next_read(broker, ch, cleanup, uid):
    """A publisher the broker keeps up with: every read holds one publish and is handled whole,
    and the connection reads on without yielding a turn (``SMALL_READ`` in
    warren/server/connection.py); each publish is queued before the method that follows it."""
    q = make_queue(ch, cleanup, f"runs-small-{uid}")
    with raw.RawConnection(broker.host, broker.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        take_runs(c)
        for i in range(100):
            c.send(with_message_id(1, q, i))
            assert c.declare_queue(1, q, passive=True)[1] == i + 1
        c.close_connection()
    assert [get(ch, q)[2] for _ in range(100)] == [b"body-%d" % i for i in range(100)]


def test_a_flooding_publisher_does_not_keep_another_connection_waiting(broker, ch, cleanup, uid):
    """One connection writes 200,000 publishes in large writes (runs of 50, reads of up to
    256 KB); another connection's queue.declare is answered while the flood is still being
    read, with a count between none and all of it: fair turns hold with runs."""
    flood_q = make_queue(ch, cleanup, f"runs-flood-{uid}")
    n, chunk = 200_000, 2000
    block = raw.publish_frames(1, "", flood_q, b"0123456789abcdef") * chunk
    done = threading.Event()
    failed: list[BaseException] = []

    def flood() -> None:
        try:
            with raw.RawConnection(broker.host, broker.port, timeout=60) as c:
                c.handshake(heartbeat=0)
                c.open_channel(1)
                take_runs(c)
                for _ in range(n // chunk):
                    c.send(block)
                c.close_connection()  # answered after every publish before it was handled
        except BaseException as e:  # reported by the assertion below
            failed.append(e)
        finally:
            done.set()

    seen: list[int] = []
    with raw.RawConnection(broker.host, broker.port, timeout=20) as other:
        other.handshake(heartbeat=0)
        other.open_channel(1)
        sender = threading.Thread(target=flood, daemon=True)
        sender.start()
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            seen.append(other.declare_queue(1, flood_q, passive=True)[1])
        sender.join(timeout=60)
        other.close_connection()
    assert not failed, failed
    assert any(0 < count < n for count in seen), f"counts seen during the flood: {seen[:20]}..."
    assert message_count(ch.connection, flood_q) == n


def test_two_floods_without_confirms_read_in_large_reads_keep_order_and_stop_at_an_error(broker, ch, cleanup, uid):
    """No confirms, so runs only because the broker is behind two publishers at once, each read
    in reads of 64 KiB or more (``backlog_read`` and ``backlogged``,
    warren/protocol/amqp0_9_1/connection.py): two connections write 5000 publishes each (about
    450 KB) at the same time, the 4500th claiming another user. Loopback hands a first 64 KB
    segment to the broker at once; what arrives while it handles that is read in reads of
    64-256 KB. As one by one, 406 closes each channel at that message: the 4499 before it are
    queued in order with their own properties, the rest dropped."""
    queues = [make_queue(ch, cleanup, f"runs-backlog-{uid}-{k}") for k in range(2)]
    failed: list[BaseException] = []

    def flood(q: str) -> None:
        try:
            frames = [with_message_id(1, q, i) for i in range(4499)]
            frames.append(publish(1, q, b"impostor", USER_ID, raw.shortstr("not-guest")))
            frames += [with_message_id(1, q, i) for i in range(4500, 5000)]
            data = b"".join(frames)
            assert len(data) >= 4 * 65536
            with raw.RawConnection(broker.host, broker.port, timeout=30) as c:
                c.handshake(heartbeat=0)
                c.open_channel(1)
                ready.wait(10)
                c.send(data)
                close = c.expect_channel_close(1, timeout=30)
                assert close.reply_code == PRECONDITION_FAILED
                c.close_connection()
        except BaseException as e:  # reported by the assertion below
            failed.append(e)

    ready = threading.Event()
    senders = [threading.Thread(target=flood, args=(q,), daemon=True) for q in queues]
    for t in senders:
        t.start()
    ready.set()
    for t in senders:
        t.join(timeout=60)
    assert not failed, failed
    for q in queues:
        assert wait_until(lambda: message_count(ch.connection, q) == 4499, timeout=10)
        got = []
        for _, props, body in ch.consume(q, auto_ack=True, inactivity_timeout=5):
            if body is None:  # nothing for 5 s: the count above says this cannot happen
                break
            got.append((body, props.message_id))
            if len(got) == 4499:
                break
        ch.cancel()
        assert got == [(b"body-%d" % i, f"id-{i}") for i in range(4499)]


@pytest.mark.parametrize("options, environment", [
    (("--publish-runs",), None),  # every connection takes runs from the start
    (("--no-publish-runs",), None),  # none does, confirms or not
    ((), "1"),  # WARREN_PUBLISH_RUNS, the environment spelling of the same setting
])
def test_a_broker_started_with_a_publish_runs_setting_serves_publishes_in_order(start_broker, monkeypatch, uid,
                                                                                options, environment):
    """Config.publish_runs (docs/configuration.md) only changes how the broker takes consecutive
    publishes; a client sees the same queue, order and confirms on a plain and a confirming
    channel whatever it says."""
    if environment is not None:
        monkeypatch.setenv("WARREN_PUBLISH_RUNS", environment)
    b = start_broker(*options)
    q = f"runs-setting-{uid}"
    n = 300
    with raw.RawConnection(b.host, b.port, timeout=20) as c:
        c.handshake(heartbeat=0)
        c.open_channel(1)
        c.send_method(1, *raw.QUEUE_DECLARE, b"\x00\x00" + raw.shortstr(q) + b"\x00" + raw.table())
        c.expect(raw.QUEUE_DECLARE_OK, 1)
        c.send(b"".join(with_message_id(1, q, i) for i in range(n)))  # plain channel
        c.open_channel(2)
        c.send_method(2, *CONFIRM_SELECT, b"\x00")
        c.expect(CONFIRM_SELECT_OK, 2)
        c.send(b"".join(with_message_id(2, q, i) for i in range(n, 2 * n)))  # confirming channel
        assert acked_upto(c, n, channel=2) == n
        c.close_connection()
    conn = connect(b)
    try:
        ch = conn.channel()
        assert wait_until(lambda: message_count(conn, q) == 2 * n, timeout=10)
        for i in range(2 * n):
            _, props, body = get(ch, q)
            assert (body, props.message_id) == (b"body-%d" % i, f"id-{i}")
    finally:
        conn.close()
