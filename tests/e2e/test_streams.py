"""Stream queues (x-queue-type=stream) over AMQP 0-9-1, through pika and aio-pika on real sockets.

Every test also runs against RabbitMQ 3.10 (WARREN_TEST_BROKER_URL) as the reference; where
Warren differs on purpose (docs/streams.md) the test says so and checks each broker's answer.
Restart and file tests need a private Warren and are skipped against RabbitMQ.
"""

from __future__ import annotations

import datetime
import signal
import time
import uuid

import aio_pika
import pika
import pytest
from pika.compat import long as pika_long
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from .helpers import PRECONDITION_FAILED, RABBITMQ, connect, message_count, wait_until
from .rawamqp import publish_bulk, publish_frames

pytestmark = pytest.mark.timeout(60)

NOT_IMPLEMENTED = 540
STREAM = {"x-queue-type": "stream"}


def declare_stream(ch, cleanup, name: str, **arguments) -> str:
    ch.queue_declare(name, durable=True, arguments={**STREAM, **arguments})
    cleanup["queues"].append(name)
    return name


def publish_confirmed(ch, queue: str, bodies, properties=None) -> None:
    """basic.publish with confirms, one at a time: each publish is its own committed batch."""
    ch.confirm_delivery()
    for body in bodies:
        ch.basic_publish("", queue, body, properties)


def consume(conn, queue: str, offset=None, count: int | None = None, prefetch: int = 1000,
            timeout: float = 5.0, ack: bool = True, settle: float = 0.0):
    """Consume on a new channel until ``count`` deliveries came (or, with ``count`` None, until
    ``settle`` seconds pass with nothing new); returns [(offset header, body, method)] and the channel."""
    chan = conn.channel()
    chan.basic_qos(prefetch_count=prefetch)
    got = []

    def on_message(c, method, props, body):
        got.append(((props.headers or {}).get("x-stream-offset"), body, method))
        if ack:
            c.basic_ack(method.delivery_tag)

    chan.basic_consume(queue, on_message, arguments={"x-stream-offset": offset} if offset is not None else None)
    deadline = time.monotonic() + timeout
    last = (0, time.monotonic())
    while time.monotonic() < deadline:
        conn.process_data_events(0.02)
        if count is not None and len(got) >= count:
            break
        if count is None:
            if len(got) != last[0]:
                last = (len(got), time.monotonic())
            elif time.monotonic() - last[1] >= settle:
                break
    return got, chan


def offsets(got) -> list[int]:
    return [o for o, _, _ in got]


def refusal(conn_factory, action) -> tuple[str, int, str]:
    """("channel" | "connection", code, text) of the error ``action(channel)`` provokes."""
    c = conn_factory()
    try:
        action(c.channel())
        c.process_data_events(0.3)
    except ChannelClosedByBroker as e:
        return "channel", e.reply_code, e.reply_text
    except ConnectionClosedByBroker as e:
        return "connection", e.reply_code, e.reply_text
    finally:
        if c.is_open:
            c.close()
    raise AssertionError("no refusal")


# --------------------------------------------------------------------------- declare


@pytest.mark.parametrize("kw, text", [
    (dict(durable=False), "invalid property 'non-durable' for queue '{q}' in vhost '/'"),
    (dict(durable=True, exclusive=True), "invalid property 'exclusive-owner' for queue '{q}' in vhost '/'"),
    (dict(durable=True, auto_delete=True), "invalid property 'auto-delete' for queue '{q}' in vhost '/'"),
    (dict(durable=True, arguments={"x-max-length": 10}),
     "invalid arg 'x-max-length' for queue '{q}' in vhost '/' of queue type rabbit_stream_queue"),
    (dict(durable=True, arguments={"x-message-ttl": 1000}),
     "invalid arg 'x-message-ttl' for queue '{q}' in vhost '/' of queue type rabbit_stream_queue"),
    (dict(durable=True, arguments={"x-dead-letter-exchange": "dlx"}),
     "invalid arg 'x-dead-letter-exchange' for queue '{q}' in vhost '/' of queue type rabbit_stream_queue"),
    (dict(durable=True, arguments={"x-max-age": "10"}), "invalid arg 'x-max-age' for queue '{q}' in vhost '/': "
                                                        "invalid_max_age"),
    (dict(durable=True, arguments={"x-max-length-bytes": -1}),
     "invalid arg 'x-max-length-bytes' for queue '{q}' in vhost '/': {{value_negative,-1}}"),
    (dict(durable=True, arguments={"x-stream-max-segment-size-bytes": 3_000_000_001}),
     "Exceeded max value for x-stream-max-segment-size-bytes"),
])
def test_declare_refusals_match_rabbitmq(broker, uid, kw, text):
    q = f"st-refused-{uid}"
    kw = {**kw, "arguments": {**STREAM, **kw.get("arguments", {})}}
    kind, code, reply = refusal(lambda: connect(broker), lambda ch: ch.queue_declare(q, **kw))
    assert (kind, code) == ("channel", PRECONDITION_FAILED)
    assert reply == "PRECONDITION_FAILED - " + text.format(q=q)
    assert refusal(lambda: connect(broker), lambda ch: ch.queue_declare(q, passive=True))[1] == 404


def test_a_server_named_stream_is_refused(broker):
    assert refusal(lambda: connect(broker), lambda ch: ch.queue_declare("", durable=True, arguments=STREAM)) == (
        "channel", PRECONDITION_FAILED,
        "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue")


def test_declare_accepts_the_stream_arguments_and_checks_equivalence(broker, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-args-{uid}", **{
        "x-max-age": "7D", "x-max-length-bytes": 10_000_000, "x-stream-max-segment-size-bytes": 1_000_000,
        "x-initial-cluster-size": 1})
    ch.queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": "7D", "x-max-length-bytes": 10_000_000,
                                                 "x-stream-max-segment-size-bytes": 1_000_000,
                                                 "x-initial-cluster-size": 1})
    kind, code, text = refusal(lambda: connect(broker), lambda c: c.queue_declare(
        q, durable=True, arguments={**STREAM, "x-max-age": "1D", "x-max-length-bytes": 10_000_000,
                                    "x-stream-max-segment-size-bytes": 1_000_000, "x-initial-cluster-size": 1}))
    assert (kind, code) == ("channel", PRECONDITION_FAILED) and "inequivalent arg 'x-max-age'" in text


# --------------------------------------------------------------------------- reading


def test_consumers_start_from_first_last_next_or_an_offset(conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-start-{uid}")
    publish_confirmed(ch, q, [f"m{i}".encode() for i in range(10)])
    first, _ = consume(conn, q, "first", count=10)
    assert offsets(first) == list(range(10)) and [b for _, b, _ in first] == [f"m{i}".encode() for i in range(10)]
    assert all(not m.redelivered for _, _, m in first)
    # each confirmed publish was a batch of its own: "last" is the last message
    last, _ = consume(conn, q, "last", settle=0.5)
    assert offsets(last) == [9]
    from_6, _ = consume(conn, q, 6, count=4)
    assert offsets(from_6) == [6, 7, 8, 9]
    before_first, _ = consume(conn, q, -5, count=10)
    assert offsets(before_first) == list(range(10))
    got_next, chan = consume(conn, q, "next", settle=0.5)
    assert got_next == []
    ch.basic_publish("", q, b"new")
    wait_until(lambda: conn.process_data_events(0.02) or len(got_next) == 1)
    assert [(o, b) for o, b, _ in got_next] == [(10, b"new")]
    beyond, _ = consume(conn, q, 12, settle=0.3)
    assert beyond == []  # waits for offset 12


def test_consumers_start_from_a_timestamp_or_an_interval(conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-time-{uid}")
    publish_confirmed(ch, q, [b"a", b"b", b"c"])
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    got, _ = consume(conn, q, past, count=3)
    assert offsets(got) == [0, 1, 2]
    for interval in ("1h", "30m", "7D"):
        got, _ = consume(conn, q, interval, count=3)
        assert offsets(got) == [0, 1, 2], interval
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    got, _ = consume(conn, q, future, settle=0.5)
    assert got == []


def test_every_delivery_carries_its_offset_as_a_signed_long_with_the_other_headers(conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-header-{uid}")
    publish_confirmed(ch, q, [b"plain"])
    publish_confirmed(ch, q, [b"with"], pika.BasicProperties(headers={"a": 1, "s": "x"}, content_type="text/plain",
                                                             delivery_mode=2))
    publish_confirmed(ch, q, [b"old"], pika.BasicProperties(headers={"x-stream-offset": "stale"}))
    chan = conn.channel()
    chan.basic_qos(prefetch_count=10)
    got = []
    chan.basic_consume(q, lambda c, m, p, b: got.append((p, b)), arguments={"x-stream-offset": "first"})
    wait_until(lambda: conn.process_data_events(0.02) or len(got) == 3)
    (p0, _), (p1, _), (p2, _) = got
    assert p0.headers == {"x-stream-offset": 0} and type(p0.headers["x-stream-offset"]) is pika_long
    assert p1.headers == {"a": 1, "s": "x", "x-stream-offset": 1}
    assert (p1.content_type, p1.delivery_mode) == ("text/plain", 2)
    assert p2.headers == {"x-stream-offset": 2}  # a header already there is replaced


def test_two_consumers_read_independently_and_reading_removes_nothing(broker, conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-two-{uid}")
    publish_confirmed(ch, q, [str(i).encode() for i in range(20)])
    conn2 = connect(broker)
    try:
        a, _ = consume(conn, q, "first", count=20)
        b, _ = consume(conn2, q, 15, count=5)
        again, _ = consume(conn2, q, "first", count=20)
    finally:
        conn2.close()
    assert offsets(a) == list(range(20)) and offsets(b) == [15, 16, 17, 18, 19] and offsets(again) == list(range(20))
    assert wait_until(lambda: message_count(conn, q) == 20, timeout=15)  # RabbitMQ's count lags a little


def test_prefetch_is_credit_acks_give_it_back(conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-credit-{uid}")
    publish_confirmed(ch, q, [str(i).encode() for i in range(30)])
    got, chan = consume(conn, q, "first", prefetch=10, ack=False, settle=0.5)
    assert offsets(got) == list(range(10))  # 10 and no more until acked
    chan.basic_ack(got[4][2].delivery_tag, multiple=True)
    wait_until(lambda: conn.process_data_events(0.02) or len(got) == 15)
    conn.process_data_events(0.3)
    assert offsets(got) == list(range(15))
    chan.basic_ack(got[-1][2].delivery_tag, multiple=True)
    wait_until(lambda: conn.process_data_events(0.02) or len(got) == 25)
    assert offsets(got) == list(range(25))


def test_nack_and_reject_only_give_credit_back(broker, conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-nack-{uid}")
    publish_confirmed(ch, q, [str(i).encode() for i in range(6)])
    if RABBITMQ:  # RabbitMQ 3.10 closes the connection; Warren treats them as acks (docs/streams.md)
        c = connect(broker)
        got, chan = consume(c, q, "first", prefetch=2, ack=False, settle=0.3)
        with pytest.raises(ConnectionClosedByBroker) as e:
            chan.basic_nack(got[0][2].delivery_tag, requeue=True)
            c.process_data_events(0.5)
        assert e.value.reply_code == NOT_IMPLEMENTED
        return
    got, chan = consume(conn, q, "first", prefetch=2, ack=False, settle=0.3)
    assert offsets(got) == [0, 1]
    chan.basic_nack(got[0][2].delivery_tag, requeue=True)
    chan.basic_reject(got[1][2].delivery_tag, requeue=False)
    wait_until(lambda: conn.process_data_events(0.02) or len(got) == 4)
    conn.process_data_events(0.3)
    assert offsets(got) == [0, 1, 2, 3] and not any(m.redelivered for _, _, m in got)
    chan.basic_recover(requeue=True)
    wait_until(lambda: conn.process_data_events(0.02) or len(got) == 6)
    assert offsets(got) == [0, 1, 2, 3, 4, 5]
    assert message_count(conn, q) == 6


def test_what_a_stream_refuses_get_purge_no_ack_and_no_prefetch(broker, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-refuse-{uid}")
    where = f"queue '{q}' in vhost '/'"
    new = lambda: connect(broker)  # noqa: E731
    assert refusal(new, lambda c: c.basic_get(q)) == (
        "connection", NOT_IMPLEMENTED, f"NOT_IMPLEMENTED - basic.get not supported by stream queues {where}")
    assert refusal(new, lambda c: c.queue_purge(q)) == (
        "connection", NOT_IMPLEMENTED, f"NOT_IMPLEMENTED - queue.purge not supported by stream queues {where}")
    assert refusal(new, lambda c: c.basic_consume(q, lambda *a: None)) == (
        "channel", PRECONDITION_FAILED, f"PRECONDITION_FAILED - consumer prefetch count is not set for '{where}'")

    def no_ack(c):
        c.basic_qos(prefetch_count=10)
        c.basic_consume(q, lambda *a: None, auto_ack=True)
    assert refusal(new, no_ack) == (
        "connection", NOT_IMPLEMENTED,
        f"NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues {where}")

    def bad_offset(c):
        c.basic_qos(prefetch_count=10)
        c.basic_consume(q, lambda *a: None, arguments={"x-stream-offset": "1x"})
    assert refusal(new, bad_offset) == (
        "channel", PRECONDITION_FAILED, f"PRECONDITION_FAILED - invalid arg 'x-stream-offset' for {where}: "
                                        "{invalid_stream_offset_arg,{longstr,<<\"1x\">>}}")


def test_transactions_commit_to_a_stream(conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-tx-{uid}")
    ch.tx_select()
    ch.basic_publish("", q, b"t1")
    ch.basic_publish("", q, b"t2")
    ch.tx_commit()
    got, _ = consume(conn, q, "first", count=2)
    assert [(o, b) for o, b, _ in got] == [(0, b"t1"), (1, b"t2")]


def test_retention_by_bytes_with_small_segments_drops_the_oldest(broker, conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-retain-{uid}", **{"x-max-length-bytes": 20_000,
                                                           "x-stream-max-segment-size-bytes": 4_000})
    body = b"r" * 200
    ch.confirm_delivery()
    for _ in range(10):
        for _ in range(50):
            ch.basic_publish("", q, body)
    def first_offset():
        # no ack: closing the channel must not find a prefetched message pika would nack
        got, chan = consume(conn, q, "first", count=1, prefetch=1, timeout=2, ack=False)
        chan.close()
        return got[0][0] if got else -1
    assert wait_until(lambda: first_offset() > 0, timeout=15)  # RabbitMQ applies retention a little later
    start = first_offset()
    got, _ = consume(conn, q, "first", settle=0.5)
    kept = offsets(got)
    # retention may drop another segment between the two reads (its tick runs on its own): the
    # second read starts at the first offset seen or later, never earlier
    assert kept[0] >= start and kept == sorted(set(kept))
    assert 20 <= len(got) <= 120  # about 20 kB of 200-octet messages remain, give or take a segment
    if not RABBITMQ:  # RabbitMQ's offsets skip a number per segment (its tracking chunks)
        assert kept == list(range(start, 500))


def test_a_consumer_far_behind_gets_fifty_thousand_messages_in_order(broker, conn, ch, cleanup, uid):
    q = declare_stream(ch, cleanup, f"st-far-{uid}")
    n = 50_000
    # filled over a raw connection (pika's per-publish cost was most of the test's time)
    publish_bulk(broker.host, broker.port, (publish_frames(1, "", q, i.to_bytes(4, "big")) for i in range(n)))
    assert wait_until(lambda: message_count(conn, q) == n, timeout=30)
    chan = conn.channel()
    chan.basic_qos(prefetch_count=2000)
    seen = []

    def on_message(c, method, props, body):
        seen.append((props.headers["x-stream-offset"], body))
        if len(seen) % 1000 == 0:
            c.basic_ack(method.delivery_tag, multiple=True)
    chan.basic_consume(q, on_message, arguments={"x-stream-offset": "first"})
    deadline = time.monotonic() + 40
    while len(seen) < n and time.monotonic() < deadline:
        conn.process_data_events(0.05)
    assert len(seen) == n
    assert all(o == i and b == i.to_bytes(4, "big") for i, (o, b) in enumerate(seen))


async def test_aio_pika_consumes_a_stream_from_an_offset(broker, uid):
    connection = await aio_pika.connect(broker.url, timeout=10)
    name = f"st-aio-{uid}"
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        queue = await channel.declare_queue(name, durable=True, arguments=STREAM)
        try:
            for i in range(5):
                await channel.default_exchange.publish(aio_pika.Message(f"a{i}".encode()), routing_key=name)
            await channel.set_qos(prefetch_count=10)
            got = []
            async with queue.iterator(arguments={"x-stream-offset": 2}) as it:
                async for message in it:
                    got.append((message.headers["x-stream-offset"], message.body))
                    await message.ack()
                    if len(got) == 3:
                        break
            assert got == [(2, b"a2"), (3, b"a3"), (4, b"a4")]
        finally:
            # aio-pika's default if_empty=True: RabbitMQ ignores it on streams, Warren honours it
            await queue.delete(if_empty=False)


# --------------------------------------------------------------------------- Warren only


def stream_dirs(b) -> set[str]:
    # with --workers: each worker's folder (the worker owning "/", or under --worker-mode queues
    # the worker owning each stream)
    return {p.name for d in b.store_dirs() if (d / "streams").exists() for p in (d / "streams").iterdir()}


def test_queue_delete_removes_the_files_and_cancels_consumers(start_broker, tmp_path):
    b = start_broker(data_dir=tmp_path / "data")
    c = connect(b)
    try:
        ch = c.channel()
        q = "st-delete"
        ch.queue_declare(q, durable=True, arguments=STREAM)
        publish_confirmed(ch, q, [b"x"] * 3)
        assert len(stream_dirs(b)) == 1
        cancelled = []
        got, chan = consume(c, q, "first", count=3)
        chan.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        ok = c.channel().queue_delete(q)
        wait_until(lambda: c.process_data_events(0.02) or cancelled)
        assert ok.method.message_count == 3 and len(cancelled) == 1
        assert stream_dirs(b) == set()
    finally:
        c.close()


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_a_restart_keeps_the_messages_and_offsets_continue(start_broker, tmp_path, stop):
    data = tmp_path / "data"
    b = start_broker(data_dir=data)
    c = connect(b)
    q = "st-restart"
    ch = c.channel()
    ch.queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": "7D"})
    publish_confirmed(ch, q, [f"before{i}".encode() for i in range(5)])
    if stop == "sigkill":  # confirmed means on disk: nothing may be lost
        b.signal(signal.SIGKILL)
        b.wait()
    else:
        c.close()
        b.stop()
    b = start_broker(data_dir=data)
    c = connect(b)
    try:
        ch = c.channel()
        assert ch.queue_declare(q, passive=True).method.message_count == 5
        publish_confirmed(ch, q, [b"after"])
        got, _ = consume(c, q, "first", count=6)
        assert [(o, bo) for o, bo, _ in got] == [(i, f"before{i}".encode()) for i in range(5)] + [(5, b"after")]
        # the arguments came back with the queue: a different x-max-age is inequivalent
        with pytest.raises(ChannelClosedByBroker) as e:
            c.channel().queue_declare(q, durable=True, arguments={**STREAM, "x-max-age": "1D"})
        assert e.value.reply_code == PRECONDITION_FAILED
    finally:
        c.close()


def test_names_do_not_collide_with_classic_queues(start_broker, tmp_path):
    """A stream and a classic queue in the same data directory keep their own files."""
    b = start_broker(data_dir=tmp_path / "data")
    c = connect(b)
    try:
        ch = c.channel()
        name = f"st-{uuid.uuid4().hex[:6]}"
        ch.queue_declare(name, durable=True, arguments=STREAM)
        ch.queue_declare(name + "-classic", durable=True)
        publish_confirmed(ch, name, [b"s"])
        ch.basic_publish("", name + "-classic", b"c", pika.BasicProperties(delivery_mode=2))
        assert len(stream_dirs(b)) == 1 and any((d / "queues").exists() for d in b.store_dirs())
        got, _ = consume(c, name, "first", count=1)
        assert got[0][1] == b"s"
    finally:
        c.close()
