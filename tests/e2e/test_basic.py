"""End-to-end tests of the basic class over TCP (pika mostly; RabbitMQ is the reference).

basic.get, message properties and header tables, QoS (prefetch and RabbitMQ's `global`
semantics), ack/nack/reject/recover, consumer distribution, exclusive consumers, consumer
tags, cancellation (client- and server-initiated), no-ack consumers and multi-frame bodies.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from datetime import datetime, timezone
from decimal import Decimal

import aio_pika
import amqp
import pika
import pytest
from pika.exceptions import ChannelClosedByBroker


from .helpers import (
    ACCESS_REFUSED, NOT_ALLOWED, NOT_FOUND, PRECONDITION_FAILED, amqp_connect, connect, get,
    make_queue, message_count, publish_n, sync, wait_until,
)

pytestmark = pytest.mark.timeout(60)


def fill(conn, ch, queue: str, n: int) -> None:
    publish_n(ch, queue, n)
    assert wait_until(lambda: message_count(conn, queue) == n), f"queue never reached {n} messages"


def filled_queues(conn, ch, cleanup, names: list[str], n: int) -> list[str]:
    """Declare the queues `names`, then fill each with n messages (see fill)."""
    queues = [make_queue(ch, cleanup, name) for name in names]
    for q in queues:
        fill(conn, ch, q, n)
    return queues


def pump(conn, until, timeout: float = 10.0) -> bool:
    """Process I/O until `until()` is true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() >= deadline:
            return False
        conn.process_data_events(time_limit=0.05)
    return True


def settle(conn, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


# --------------------------------------------------------------------------- get


def test_basic_get_on_an_empty_queue_returns_get_empty(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"get-empty-{uid}")
    method, props, body = ch.basic_get(q, auto_ack=False)
    assert (method, props, body) == (None, None, None)


def test_basic_get_returns_messages_in_order_with_get_ok_fields(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"get-ok-{uid}")
    fill(conn, ch, q, 3)
    seen = []
    for expected_remaining in (2, 1, 0):
        method, props, body = ch.basic_get(q, auto_ack=True)
        assert isinstance(method, pika.spec.Basic.GetOk)
        assert method.redelivered is False
        assert method.exchange == ""
        assert method.routing_key == q
        assert method.message_count == expected_remaining
        seen.append(body)
    assert seen == [b"0", b"1", b"2"]
    assert ch.basic_get(q, auto_ack=True) == (None, None, None)


def test_basic_get_delivery_tags_increase_from_one_per_channel(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"get-tags-{uid}")
    fill(conn, ch, q, 3)
    tags = [ch.basic_get(q, auto_ack=False)[0].delivery_tag for _ in range(3)]
    assert tags == [1, 2, 3]
    ch.basic_ack(3, multiple=True)


def test_basic_get_on_a_missing_queue_fails_with_404(ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.basic_get(f"missing-{uid}")
    assert ei.value.reply_code == NOT_FOUND


# --------------------------------------------------------------------------- properties


FULL_HEADERS = {
    "str": "hello",
    "unicode": "h\u00e9llo \u2713",
    "empty": "",
    "int": 42,
    "zero": 0,
    "negative": -17,
    "big": 2**40,
    "big_negative": -(2**40),
    "true": True,
    "false": False,
    "decimal": Decimal("123.45"),
    "negative_decimal": Decimal("-0.5"),
    "datetime": datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc),
    "nested": {"a": 1, "b": "two", "c": {"deep": [1, "x", None]}},
    "list": ["a", 1, -2, True, None, {"k": "v"}, [1, 2]],
    "empty_list": [],
    "empty_table": {},
    "bytes": b"\x00\x01\xffbinary",
    "none": None,
}


def test_every_basic_property_round_trips_exactly(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"props-{uid}")
    props = pika.BasicProperties(
        content_type="application/json",
        content_encoding="gzip",
        headers={"h": "v"},
        delivery_mode=2,
        priority=7,
        correlation_id="corr-1",
        reply_to="reply-queue",
        expiration="600000",
        message_id="msg-1",
        timestamp=1_700_000_000,
        type="order.created",
        user_id="guest",  # RabbitMQ rejects a user-id other than the authenticated user (406)
        app_id="warren-tests",
        cluster_id="cluster-x",
    )
    ch.basic_publish("", q, b"{}", props)
    method, got, body = get(ch, q, auto_ack=True)
    assert method is not None
    assert body == b"{}"
    for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
                 "user_id", "app_id", "cluster_id"):
        assert getattr(got, name) == getattr(props, name), name


def test_a_message_without_properties_arrives_without_properties(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"noprops-{uid}")
    ch.basic_publish("", q, b"bare")
    method, got, body = get(ch, q, auto_ack=True)
    assert body == b"bare"
    for name in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                 "correlation_id", "reply_to", "expiration", "message_id", "timestamp", "type",
                 "user_id", "app_id", "cluster_id"):
        assert getattr(got, name) is None, name


def test_an_empty_body_round_trips(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"empty-{uid}")
    ch.basic_publish("", q, b"", pika.BasicProperties(message_id="e"))
    method, got, body = get(ch, q, auto_ack=True)
    assert method is not None
    assert body == b""
    assert got.message_id == "e"


def test_a_user_id_other_than_the_authenticated_user_is_refused_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"userid-{uid}")
    ch.basic_publish("", q, b"x", pika.BasicProperties(user_id="mallory"))
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_a_headers_table_with_every_pika_field_type_round_trips_exactly(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"hdrs-{uid}")
    ch.basic_publish("", q, b"h", pika.BasicProperties(headers=FULL_HEADERS))
    method, got, body = get(ch, q, auto_ack=True)
    assert method is not None
    assert got.headers == FULL_HEADERS
    # Types survive too (== would let True == 1 and b"" == "" mistakes slip by otherwise).
    for key, value in FULL_HEADERS.items():
        got_value = got.headers[key]
        if isinstance(value, bool) or value is None:
            assert got_value is value, key
        elif isinstance(value, int):  # pika decodes 64-bit ints as its `long` subclass of int
            assert isinstance(got_value, int) and not isinstance(got_value, bool), key
        else:
            assert type(got_value) is type(value), key


def test_float_header_values_round_trip_as_double_through_py_amqp(broker, ch, cleanup, uid):
    # pika cannot encode floats; py-amqp writes them as 'd' (64-bit double).
    q = make_queue(ch, cleanup, f"hdr-double-{uid}")
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        headers = {"double": 3.141592653589793, "neg": -0.25, "list": [1.5, 2.0]}
        chan.basic_publish(amqp.Message(b"f", application_headers=headers), exchange="", routing_key=q)
        deadline = time.monotonic() + 5
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = chan.basic_get(q, no_ack=True)
            if msg is None:
                time.sleep(0.02)
        assert msg is not None
        assert msg.headers == headers
        assert all(isinstance(v, float) for v in (msg.headers["double"], msg.headers["neg"]))
    finally:
        c.close()


async def test_float_header_values_round_trip_as_single_precision_through_aio_pika(broker, uid):
    # pamqp writes Python floats as 'f' (32-bit float); 1.5 and -0.25 are exact in binary32.
    connection = await aio_pika.connect(broker.url, timeout=10)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(f"hdr-float-{uid}", exclusive=True)
        headers = {"f": 1.5, "g": -0.25, "s": "x", "i": 7, "nested": {"f": 2.5}}
        await channel.default_exchange.publish(aio_pika.Message(b"f", headers=headers), routing_key=queue.name)
        msg = None
        for _ in range(100):
            msg = await queue.get(no_ack=True, fail=False)
            if msg is not None:
                break
            await asyncio.sleep(0.05)
        assert msg is not None
        assert msg.headers == headers


# --------------------------------------------------------------------------- qos


def test_prefetch_count_limits_unacked_deliveries_to_five_out_of_fifty(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"qos5-{uid}")
    fill(conn, ch, q, 50)
    ch.basic_qos(prefetch_count=5)
    outstanding: list[int] = []
    received: list[bytes] = []
    max_outstanding = 0

    def on_message(_ch, method, _props, body):
        nonlocal max_outstanding
        outstanding.append(method.delivery_tag)
        received.append(body)
        max_outstanding = max(max_outstanding, len(outstanding))
        assert len(outstanding) <= 5, f"{len(outstanding)} unacked deliveries with prefetch 5"

    ch.basic_consume(q, on_message)
    # Without acks the consumer fills up to exactly the prefetch limit, and stays there.
    assert pump(conn, lambda: len(outstanding) >= 5)
    settle(conn, 0.5)
    assert len(outstanding) == 5
    assert message_count(conn, q) == 45

    # Ack slowly, one at a time, and keep checking the limit on every delivery.
    deadline = time.monotonic() + 30
    while len(received) < 50 and time.monotonic() < deadline:
        if outstanding:
            ch.basic_ack(outstanding.pop(0))
        conn.process_data_events(time_limit=0.01)
    assert len(received) == 50
    assert received == [str(i).encode() for i in range(50)]
    assert max_outstanding == 5
    for tag in outstanding:
        ch.basic_ack(tag)
    outstanding.clear()


def test_prefetch_count_is_per_consumer_when_global_is_false(conn, ch, cleanup, uid):
    # RabbitMQ reinterprets the flag: global=false limits each *new consumer* separately.
    q1, q2 = filled_queues(conn, ch, cleanup, [f"qosc1-{uid}", f"qosc2-{uid}"], 10)
    ch.basic_qos(prefetch_count=2, global_qos=False)
    got = {q1: 0, q2: 0}

    def cb(_ch, method, _props, _body):
        got[method.routing_key] += 1

    ch.basic_consume(q1, cb)
    ch.basic_consume(q2, cb)
    assert pump(conn, lambda: sum(got.values()) >= 4)
    settle(conn, 0.5)
    assert got == {q1: 2, q2: 2}


def test_prefetch_count_is_shared_by_the_channel_when_global_is_true(conn, ch, cleanup, uid):
    # RabbitMQ: global=true limits all consumers on the channel together (under --worker-mode
    # queues too, whichever workers own the two queues: warren/spread/shared_prefetch.py)
    q1, q2 = filled_queues(conn, ch, cleanup, [f"qosg1-{uid}", f"qosg2-{uid}"], 10)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    tags: list[int] = []

    def cb(_ch, method, _props, _body):
        tags.append(method.delivery_tag)

    ch.basic_consume(q1, cb)
    ch.basic_consume(q2, cb)
    assert pump(conn, lambda: len(tags) >= 3)
    settle(conn, 0.5)
    assert len(tags) == 3
    # Acking one frees exactly one slot for the channel.
    ch.basic_ack(tags[0])
    assert pump(conn, lambda: len(tags) >= 4)
    settle(conn, 0.3)
    assert len(tags) == 4


def test_room_freed_by_acks_of_one_queue_goes_to_the_channels_other_queue(conn, ch, cleanup, uid):
    # RabbitMQ: the channel's shared prefetch is the channel's; acking the first queue's
    # deliveries lets the second queue's flow, with no publish to wake it (Warren used to wait)
    [q1] = filled_queues(conn, ch, cleanup, [f"qosr1-{uid}"], 3)
    [q2] = filled_queues(conn, ch, cleanup, [f"qosr2-{uid}"], 10)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    got: list[tuple[str, int]] = []

    def cb(_ch, method, _props, _body):
        got.append((method.routing_key, method.delivery_tag))

    ch.basic_consume(q1, cb)
    assert pump(conn, lambda: len(got) >= 3)
    ch.basic_consume(q2, cb)
    settle(conn, 0.3)
    assert [q for q, _ in got] == [q1] * 3
    ch.basic_ack(got[-1][1], multiple=True)
    assert pump(conn, lambda: len(got) >= 6)
    settle(conn, 0.3)
    assert [q for q, _ in got[3:]] == [q2] * 3


def test_queues_take_turns_under_a_shared_prefetch_of_one(conn, ch, cleanup, uid):
    # two full queues, one slot for the channel: acking each delivery at once, both queues are
    # served (RabbitMQ likewise), not only the one whose message was acked
    q1, q2 = filled_queues(conn, ch, cleanup, [f"qost1-{uid}", f"qost2-{uid}"], 20)
    ch.basic_qos(prefetch_count=1, global_qos=True)
    got: list[tuple[str, int]] = []

    def cb(_ch, method, _props, _body):
        got.append((method.routing_key, method.delivery_tag))

    ch.basic_consume(q1, cb)
    ch.basic_consume(q2, cb)
    deadline = time.monotonic() + 10
    while len(got) < 12 and time.monotonic() < deadline:
        n = len(got)
        conn.process_data_events(time_limit=0.05)
        assert len(got) - n <= 1
        if len(got) > n:
            ch.basic_ack(got[-1][1])
    counts = {q: sum(1 for name, _ in got if name == q) for q in (q1, q2)}
    assert len(got) >= 12 and min(counts.values()) >= 4, counts


def test_per_consumer_and_per_channel_prefetch_limits_apply_together(conn, ch, cleanup, uid):
    q1, q2 = filled_queues(conn, ch, cleanup, [f"qosb1-{uid}", f"qosb2-{uid}"], 10)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    ch.basic_qos(prefetch_count=1, global_qos=False)
    got = {q1: 0, q2: 0}

    def cb(_ch, method, _props, _body):
        got[method.routing_key] += 1

    ch.basic_consume(q1, cb)
    ch.basic_consume(q2, cb)
    assert pump(conn, lambda: sum(got.values()) >= 2)
    settle(conn, 0.5)
    assert got == {q1: 1, q2: 1}


def test_prefetch_does_not_limit_basic_get(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"qosget-{uid}")
    fill(conn, ch, q, 4)
    ch.basic_qos(prefetch_count=1)
    methods = [ch.basic_get(q, auto_ack=False)[0] for _ in range(4)]
    assert all(m is not None for m in methods)
    ch.basic_ack(methods[-1].delivery_tag, multiple=True)


# --------------------------------------------------------------------------- ack / nack / reject


def test_nack_with_requeue_brings_the_message_back_marked_redelivered(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"nackrq-{uid}")
    fill(conn, ch, q, 1)
    method, _, body = ch.basic_get(q, auto_ack=False)
    assert method.redelivered is False
    ch.basic_nack(method.delivery_tag, requeue=True)
    method2, _, body2 = get(ch, q, auto_ack=False)
    assert method2 is not None
    assert body2 == body
    assert method2.redelivered is True
    assert method2.delivery_tag != method.delivery_tag
    ch.basic_ack(method2.delivery_tag)


def test_reject_with_requeue_brings_the_message_back_marked_redelivered(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"rejrq-{uid}")
    fill(conn, ch, q, 1)
    method, _, body = ch.basic_get(q, auto_ack=False)
    ch.basic_reject(method.delivery_tag, requeue=True)
    method2, _, body2 = get(ch, q, auto_ack=True)
    assert (body2, method2.redelivered) == (body, True)


def test_reject_without_requeue_drops_the_message(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"rej-{uid}")
    fill(conn, ch, q, 1)
    method, _, _ = ch.basic_get(q, auto_ack=False)
    ch.basic_reject(method.delivery_tag, requeue=False)
    ch.close()  # nothing is left unacked to requeue
    time.sleep(0.2)
    assert message_count(conn, q) == 0


def test_a_requeued_message_keeps_its_place_at_the_head_of_the_queue(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"rqorder-{uid}")
    fill(conn, ch, q, 3)
    method, _, body = ch.basic_get(q, auto_ack=False)
    assert body == b"0"
    ch.basic_nack(method.delivery_tag, requeue=True)
    bodies = [get(ch, q, auto_ack=True)[2] for _ in range(3)]
    assert bodies == [b"0", b"1", b"2"]


def test_ack_of_an_unknown_delivery_tag_closes_the_channel_with_406(conn, ch, cleanup, uid):
    ch.basic_ack(delivery_tag=999)
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert conn.is_open


def test_acking_a_delivery_twice_closes_the_channel_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ack2-{uid}")
    fill(conn, ch, q, 1)
    method, _, _ = ch.basic_get(q, auto_ack=False)
    ch.basic_ack(method.delivery_tag)
    ch.basic_ack(method.delivery_tag)
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_ack_of_a_no_ack_delivery_tag_closes_the_channel_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ackna-{uid}")
    fill(conn, ch, q, 1)
    method, _, _ = ch.basic_get(q, auto_ack=True)
    ch.basic_ack(method.delivery_tag)
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_ack_multiple_acknowledges_every_delivery_up_to_the_tag(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ackm-{uid}")
    fill(conn, ch, q, 5)
    tags = [ch.basic_get(q, auto_ack=False)[0].delivery_tag for _ in range(5)]
    ch.basic_ack(tags[2], multiple=True)
    sync(ch)
    ch.close()  # the two unacked deliveries go back
    assert wait_until(lambda: message_count(conn, q) == 2)
    ch2 = conn.channel()
    assert [get(ch2, q, auto_ack=True)[2] for _ in range(2)] == [b"3", b"4"]


def test_ack_multiple_with_tag_zero_acknowledges_everything_outstanding(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ackm0-{uid}")
    fill(conn, ch, q, 4)
    for _ in range(4):
        assert ch.basic_get(q, auto_ack=False)[0] is not None
    ch.basic_ack(0, multiple=True)
    sync(ch)
    ch.close()
    time.sleep(0.2)
    assert message_count(conn, q) == 0


def test_nack_multiple_without_requeue_drops_every_delivery_up_to_the_tag(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"nackm-{uid}")
    fill(conn, ch, q, 5)
    tags = [ch.basic_get(q, auto_ack=False)[0].delivery_tag for _ in range(5)]
    ch.basic_nack(tags[3], multiple=True, requeue=False)
    sync(ch)
    assert message_count(conn, q) == 0
    ch.close()
    assert wait_until(lambda: message_count(conn, q) == 1)
    assert get(conn.channel(), q, auto_ack=True)[2] == b"4"


def test_nack_multiple_with_requeue_returns_every_delivery_up_to_the_tag_in_order(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"nackmr-{uid}")
    fill(conn, ch, q, 5)
    tags = [ch.basic_get(q, auto_ack=False)[0].delivery_tag for _ in range(5)]
    ch.basic_nack(tags[2], multiple=True, requeue=True)
    assert wait_until(lambda: message_count(conn, q) == 3)
    got = [get(ch, q, auto_ack=True) for _ in range(3)]
    assert [b for _, _, b in got] == [b"0", b"1", b"2"]
    assert all(m.redelivered for m, _, _ in got)
    ch.basic_ack(tags[4], multiple=True)


def test_recover_with_requeue_redelivers_unacked_messages_marked_redelivered(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"recover-{uid}")
    fill(conn, ch, q, 3)
    deliveries: list[tuple[bytes, bool, int]] = []
    ch.basic_consume(q, lambda _c, m, _p, b: deliveries.append((b, m.redelivered, m.delivery_tag)))
    assert pump(conn, lambda: len(deliveries) >= 3)
    assert [(b, r) for b, r, _ in deliveries] == [(b"0", False), (b"1", False), (b"2", False)]
    ch.basic_recover(requeue=True)
    assert pump(conn, lambda: len(deliveries) >= 6)
    again = deliveries[3:]
    assert sorted(b for b, _, _ in again) == [b"0", b"1", b"2"]
    assert all(r for _, r, _ in again)
    # The new deliveries have fresh tags and can be acked; the old ones are gone.
    ch.basic_ack(max(t for _, _, t in again), multiple=True)
    sync(ch)
    ch.close()
    time.sleep(0.2)
    assert message_count(conn, q) == 0


# --------------------------------------------------------------------------- consumers


def test_two_consumers_on_one_queue_receive_messages_round_robin(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"rr-{uid}")
    order: list[tuple[str, bytes]] = []
    t1 = ch.basic_consume(q, lambda _c, m, _p, b: order.append((m.consumer_tag, b)), auto_ack=True)
    t2 = ch.basic_consume(q, lambda _c, m, _p, b: order.append((m.consumer_tag, b)), auto_ack=True)
    publisher = conn.channel()
    publish_n(publisher, q, 20)
    assert pump(conn, lambda: len(order) >= 20)
    tags = [t for t, _ in order]
    assert [b for _, b in order] == [str(i).encode() for i in range(20)]
    assert tags.count(t1) == 10 and tags.count(t2) == 10
    assert all(tags[i] != tags[i + 1] for i in range(19)), f"not alternating: {tags}"


def test_round_robin_also_alternates_between_consumers_on_different_connections(broker, conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"rr2-{uid}")
    other = connect(broker)
    try:
        order: list[str] = []
        ch.basic_consume(q, lambda _c, m, _p, b: order.append("A"), auto_ack=True)
        other.channel().basic_consume(q, lambda _c, m, _p, b: order.append("B"), auto_ack=True)
        publish_n(conn.channel(), q, 10)
        deadline = time.monotonic() + 10
        while len(order) < 10 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.02)
            other.process_data_events(time_limit=0.02)
        assert order.count("A") == 5 and order.count("B") == 5
    finally:
        other.close()


def test_an_exclusive_consumer_blocks_a_second_consumer_with_403(broker, conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"xcons-{uid}")
    ch.basic_consume(q, lambda *a: None, exclusive=True)
    ch2 = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch2.basic_consume(q, lambda *a: None)
    assert ei.value.reply_code == ACCESS_REFUSED
    assert conn.is_open


def test_an_exclusive_consume_on_a_queue_that_has_consumers_fails_with_403(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"xcons2-{uid}")
    ch.basic_consume(q, lambda *a: None)
    ch2 = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch2.basic_consume(q, lambda *a: None, exclusive=True)
    assert ei.value.reply_code == ACCESS_REFUSED


def test_a_queue_accepts_consumers_again_after_the_exclusive_consumer_cancels(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"xcons3-{uid}")
    tag = ch.basic_consume(q, lambda *a: None, exclusive=True)
    ch.basic_cancel(tag)
    ch2 = conn.channel()
    ch2.basic_consume(q, lambda *a: None)


def test_a_duplicate_consumer_tag_on_one_channel_closes_the_connection_with_530(broker, ch, cleanup, uid):
    # pika refuses duplicate tags client-side, so use py-amqp, which sends what it is told.
    q = make_queue(ch, cleanup, f"duptag-{uid}")
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        chan.basic_consume(q, consumer_tag=f"tag-{uid}", callback=lambda m: None)
        with pytest.raises(amqp.exceptions.NotAllowed) as ei:
            chan.basic_consume(q, consumer_tag=f"tag-{uid}", callback=lambda m: None)
        assert ei.value.code == NOT_ALLOWED
        with pytest.raises(Exception):
            c.channel().queue_declare("", exclusive=True)
    finally:
        try:
            c.close()
        except Exception:
            pass


def test_the_same_consumer_tag_may_be_used_on_two_channels(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"sametag-{uid}")
    tag = f"shared-{uid}"
    assert ch.basic_consume(q, lambda *a: None, consumer_tag=tag) == tag
    assert conn.channel().basic_consume(q, lambda *a: None, consumer_tag=tag) == tag


def test_the_server_generates_a_consumer_tag_when_none_is_given(broker, ch, cleanup, uid):
    # pika always sends its own tag, so ask py-amqp, which sends an empty one.
    q = make_queue(ch, cleanup, f"gentag-{uid}")
    c = amqp_connect(broker)
    try:
        chan = c.channel()
        t1 = chan.basic_consume(q, callback=lambda m: None)
        t2 = chan.basic_consume(q, callback=lambda m: None)
        assert t1 and t2 and t1 != t2
        assert t1.startswith("amq.ctag-")
    finally:
        c.close()


def test_basic_cancel_stops_deliveries_to_that_consumer(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"cancel-{uid}")
    got: list[bytes] = []
    tag = ch.basic_consume(q, lambda _c, _m, _p, b: got.append(b), auto_ack=True)
    publish_n(ch, q, 2, prefix="before-")
    assert pump(conn, lambda: len(got) >= 2)
    ch.basic_cancel(tag)
    publish_n(ch, q, 3, prefix="after-")
    assert wait_until(lambda: message_count(conn, q) == 3)
    settle(conn, 0.2)
    assert got == [b"before-0", b"before-1"]


def test_unacked_deliveries_can_still_be_acked_after_basic_cancel(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"cancelack-{uid}")
    fill(conn, ch, q, 2)
    tags: list[int] = []
    ctag = ch.basic_consume(q, lambda _c, m, _p, _b: tags.append(m.delivery_tag))
    assert pump(conn, lambda: len(tags) >= 2)
    ch.basic_cancel(ctag)
    ch.basic_ack(tags[-1], multiple=True)
    sync(ch)
    ch.close()
    time.sleep(0.2)
    assert message_count(conn, q) == 0


def test_deleting_a_queue_sends_a_consumer_cancel_notification(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"cancelnotify-{uid}")
    cancelled: list = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame))
    tag = ch.basic_consume(q, lambda *a: None)
    conn.channel().queue_delete(q)
    assert pump(conn, lambda: bool(cancelled)), "no basic.cancel from the server"
    method = cancelled[0].method if hasattr(cancelled[0], "method") else cancelled[0]
    assert isinstance(method, pika.spec.Basic.Cancel)
    assert method.consumer_tag == tag
    assert ch.is_open  # the channel survives; only the consumer is gone
    sync(ch)


async def test_deleting_a_queue_notifies_an_aio_pika_consumer(broker, uid):
    connection = await aio_pika.connect(broker.url, timeout=10)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(f"cancel-aio-{uid}")
        async def ignore(message):
            pass

        tag = await queue.consume(ignore)
        underlying = await channel.get_underlay_channel()
        cancels: asyncio.Queue = asyncio.Queue()
        underlying.on_consumer_cancel_callbacks.add(cancels.put_nowait)
        other = await connection.channel()
        await other.queue_delete(queue.name)
        frame = await asyncio.wait_for(cancels.get(), timeout=10)
        assert frame.consumer_tag == tag
        assert tag not in underlying.consumers
        assert not channel.is_closed


def test_no_ack_consumer_receives_everything_and_leaves_nothing_unacked(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"noack-{uid}")
    fill(conn, ch, q, 20)
    ch.basic_qos(prefetch_count=1)  # ignored for no-ack consumers
    got: list[bytes] = []
    ch.basic_consume(q, lambda _c, _m, _p, b: got.append(b), auto_ack=True)
    assert pump(conn, lambda: len(got) >= 20)
    assert got == [str(i).encode() for i in range(20)]
    ch.close()  # nothing to requeue
    time.sleep(0.2)
    assert message_count(conn, q) == 0


def test_consuming_from_a_missing_queue_fails_with_404(ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.basic_consume(f"missing-{uid}", lambda *a: None)
    assert ei.value.reply_code == NOT_FOUND


def test_unacked_messages_are_requeued_when_the_consumer_channel_closes(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"requeue-close-{uid}")
    fill(conn, ch, q, 3)
    got: list[int] = []
    ch.basic_consume(q, lambda _c, m, _p, _b: got.append(m.delivery_tag))
    assert pump(conn, lambda: len(got) >= 3)
    ch.close()
    assert wait_until(lambda: message_count(conn, q) == 3)
    method, _, body = get(conn.channel(), q, auto_ack=True)
    assert (body, method.redelivered) == (b"0", True)


# --------------------------------------------------------------------------- large bodies


def test_a_10_mib_message_crosses_many_body_frames_intact(broker, cleanup, uid):
    c = connect(broker, frame_max=131072)
    try:
        assert c._impl.params.frame_max <= 131072  # negotiated: ~80 body frames per message
        chan = c.channel()
        q = make_queue(chan, cleanup, f"big-{uid}")
        payload = os.urandom(10 * 1024 * 1024)
        digest = hashlib.sha256(payload).hexdigest()
        chan.basic_publish("", q, payload, pika.BasicProperties(message_id="big"))
        # Once via basic.get ...
        method, props, body = get(chan, q, auto_ack=False, timeout=20)
        assert method is not None
        assert len(body) == len(payload)
        assert hashlib.sha256(body).hexdigest() == digest
        assert props.message_id == "big"
        # ... and once more via basic.deliver after a requeue.
        chan.basic_nack(method.delivery_tag, requeue=True)
        bodies: list[bytes] = []
        chan.basic_consume(q, lambda _c, _m, _p, b: bodies.append(b), auto_ack=True)
        assert pump(c, lambda: bool(bodies), timeout=20)
        assert hashlib.sha256(bodies[0]).hexdigest() == digest
    finally:
        c.close()


def test_bodies_at_frame_boundaries_arrive_intact(broker, cleanup, uid):
    c = connect(broker, frame_max=131072)
    try:
        chan = c.channel()
        q = make_queue(chan, cleanup, f"edges-{uid}")
        fmax = c._impl.params.frame_max
        sizes = [1, fmax - 9, fmax - 8, fmax - 7, 2 * (fmax - 8), 2 * (fmax - 8) + 1]
        payloads = [os.urandom(n) for n in sizes]
        for p in payloads:
            chan.basic_publish("", q, p)
        for p in payloads:
            method, _, body = get(chan, q, auto_ack=True)
            assert method is not None
            assert body == p, f"size {len(p)}"
    finally:
        c.close()
