"""Poison-message handling (x-delivery-limit and the x-delivery-count header) with pika.

RabbitMQ 3.10 offers this on quorum queues only (a classic queue refuses the argument with
406); Warren accepts it on any queue with the quorum queue's semantics. So that the assertions
are RabbitMQ's, every test here declares a quorum queue when run against RabbitMQ
(WARREN_TEST_BROKER_URL) and a classic one against Warren; the one test about classic queues
accepting the argument is skipped on RabbitMQ.

Semantics (checked against RabbitMQ): x-delivery-count counts the returns (nack or reject with
requeue, or the channel closing with the message unacked); a redelivery carries it, and so does
every basic.get (0 the first time), but not a consumer's first delivery; a return that takes the count past the limit dead-letters the message (reason
delivery_limit) or drops it. The dead letter does not carry x-delivery-count.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, RABBITMQ, get, make_exchange, make_queue, message_count, wait_until

pytestmark = pytest.mark.timeout(60)


def limited_queue(ch, cleanup, name: str, limit, **arguments) -> str:
    arguments = {"x-delivery-limit": limit, **arguments}
    if RABBITMQ:  # RabbitMQ 3.10 has delivery limits on quorum queues only
        return make_queue(ch, cleanup, name, durable=True, arguments={"x-queue-type": "quorum", **arguments})
    return make_queue(ch, cleanup, name, arguments=arguments)


def deliveries(ch, queue: str, how: str = "nack", max_rounds: int = 10) -> list[tuple[int, bool]]:
    """basic.get and return the message until it stops coming: [(x-delivery-count, redelivered)]."""
    seen = []
    for _ in range(max_rounds):
        method, props, _ = get(ch, queue, timeout=0.5)
        if method is None:
            break
        seen.append(((props.headers or {}).get("x-delivery-count"), method.redelivered))
        if how == "nack":
            ch.basic_nack(method.delivery_tag, requeue=True)
        else:
            ch.basic_reject(method.delivery_tag, requeue=True)
    return seen


def test_x_delivery_count_starts_at_zero_and_counts_returns(ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-count-{uid}", 5)
    ch.basic_publish("", q, b"x", pika.BasicProperties(headers={"mine": "kept"}))
    method, props, _ = get(ch, q)
    assert props.headers == {"mine": "kept", "x-delivery-count": 0}
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, props, _ = get(ch, q)
    assert props.headers["x-delivery-count"] == 1 and method.redelivered
    ch.basic_reject(method.delivery_tag, requeue=True)
    method, props, _ = get(ch, q)
    assert props.headers["x-delivery-count"] == 2
    ch.basic_ack(method.delivery_tag)


def test_past_the_limit_a_message_is_dropped_without_a_dead_letter_exchange(conn, ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-drop-{uid}", 2)
    ch.basic_publish("", q, b"poison")
    assert deliveries(ch, q) == [(0, False), (1, True), (2, True)]
    assert message_count(conn, q) == 0


def test_past_the_limit_a_message_is_dead_lettered_with_reason_delivery_limit(conn, ch, cleanup, uid):
    dlx = make_exchange(ch, cleanup, f"dlim-dlx-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"dlim-catch-{uid}")
    ch.queue_bind(catch, dlx)
    q = limited_queue(ch, cleanup, f"dlim-dl-{uid}", 1, **{"x-dead-letter-exchange": dlx})
    ch.basic_publish("", q, b"poison", pika.BasicProperties(expiration="100000", headers={"k": 1}))
    assert deliveries(ch, q, how="reject") == [(0, False), (1, True)]
    assert wait_until(lambda: message_count(conn, catch) == 1)
    method, props, body = get(ch, catch, auto_ack=True)
    assert body == b"poison" and method.exchange == dlx and method.routing_key == q
    assert "x-delivery-count" not in props.headers
    assert props.headers["k"] == 1
    [death] = props.headers["x-death"]
    assert death["reason"] == "delivery_limit" and death["queue"] == q and death["count"] == 1
    assert death["original-expiration"] == "100000"
    assert props.headers["x-first-death-reason"] == "delivery_limit"


def test_a_limit_of_zero_allows_one_delivery(conn, ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-zero-{uid}", 0)
    ch.basic_publish("", q, b"once")
    assert deliveries(ch, q) == [(0, False)]
    assert message_count(conn, q) == 0


def test_a_channel_closing_with_the_message_unacked_counts_as_a_return(conn, ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-close-{uid}", 1)
    ch.basic_publish("", q, b"x")
    for expected in (0, 1):
        other = conn.channel()
        _, props, _ = get(other, q)
        assert props.headers["x-delivery-count"] == expected
        other.close()  # unacked: returned
    time.sleep(0.2)
    assert message_count(conn, q) == 0


def test_a_consumer_sees_the_count_grow_until_the_message_is_gone(conn, ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-consume-{uid}", 3)
    ch.basic_publish("", q, b"x")
    counts = []

    def on_message(c, m, p, b):
        counts.append(((p.headers or {}).get("x-delivery-count"), m.redelivered))
        c.basic_nack(m.delivery_tag, requeue=True)

    ch.basic_consume(q, on_message)
    deadline = time.monotonic() + 5
    while len(counts) < 4 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    conn.process_data_events(0.3)
    # no header on a consumer's first delivery (unlike basic.get), as RabbitMQ
    assert counts == [(None, False), (1, True), (2, True), (3, True)]


def test_acked_messages_are_unaffected_by_the_limit(ch, cleanup, uid):
    q = limited_queue(ch, cleanup, f"dlim-ack-{uid}", 0)
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    for i in range(3):
        method, props, body = get(ch, q)
        assert body == f"m{i}".encode() and props.headers["x-delivery-count"] == 0
        ch.basic_ack(method.delivery_tag)


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 refuses x-delivery-limit on classic queues (406)")
def test_warren_accepts_a_delivery_limit_on_a_classic_queue(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"dlim-classic-{uid}", arguments={"x-delivery-limit": 1})
    ch.basic_publish("", q, b"x")
    assert [c for c, _ in deliveries(ch, q)] == [0, 1]


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 quorum queues accept any x-delivery-limit value")
@pytest.mark.parametrize("value", [-1, "3"])
def test_an_invalid_delivery_limit_is_refused_with_406(ch, cleanup, uid, value):
    with pytest.raises(ChannelClosedByBroker) as ei:
        limited_queue(ch, cleanup, f"dlim-bad-{uid}", value)
    assert ei.value.reply_code == PRECONDITION_FAILED
