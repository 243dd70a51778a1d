"""Priority queues (x-max-priority and the priority property) with pika; RabbitMQ is the
reference: higher priorities first, arrival order within a priority, priorities above the
maximum served as the maximum, requeued messages back in their places.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, get, make_exchange, make_queue, message_count, wait_until

pytestmark = pytest.mark.timeout(60)


def publish(ch, queue: str, body: str, priority: int | None = None, **props) -> None:
    ch.basic_publish("", queue, body.encode(), pika.BasicProperties(priority=priority, **props))


def drain(ch, queue: str) -> list[str]:
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body.decode())


def test_higher_priorities_come_first_and_equal_ones_in_arrival_order(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-order-{uid}", arguments={"x-max-priority": 10})
    for body, p in (("a1", 1), ("b5", 5), ("c3", 3), ("d-", None), ("e5", 5), ("f0", 0), ("g1", 1)):
        publish(ch, q, body, p)
    assert drain(ch, q) == ["b5", "e5", "c3", "a1", "g1", "d-", "f0"]


def test_a_priority_above_the_maximum_is_served_as_the_maximum(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-max-{uid}", arguments={"x-max-priority": 5})
    publish(ch, q, "low", 4)
    publish(ch, q, "five-a", 5)
    publish(ch, q, "nine", 9)
    publish(ch, q, "five-b", 5)
    assert drain(ch, q) == ["five-a", "nine", "five-b", "low"]


def test_a_queue_without_x_max_priority_ignores_priorities(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-none-{uid}")
    publish(ch, q, "a", 1)
    publish(ch, q, "b", 9)
    assert drain(ch, q) == ["a", "b"]


def test_x_max_priority_zero_is_accepted_and_keeps_arrival_order(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-zero-{uid}", arguments={"x-max-priority": 0})
    publish(ch, q, "a", 1)
    publish(ch, q, "b", 9)
    assert drain(ch, q) == ["a", "b"]


def test_a_requeued_message_goes_back_to_its_place_within_its_priority(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-requeue-{uid}", arguments={"x-max-priority": 5})
    publish(ch, q, "hi-1", 5)
    publish(ch, q, "lo", 1)
    method, _, body = get(ch, q)
    assert body == b"hi-1"
    publish(ch, q, "hi-2", 5)
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, _, body = get(ch, q, auto_ack=True)
    assert body == b"hi-1" and method.redelivered
    assert drain(ch, q) == ["hi-2", "lo"]


def test_priority_order_holds_for_a_consumer_with_prefetch_one(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-prefetch-{uid}", arguments={"x-max-priority": 9})
    for i in range(3):
        publish(ch, q, f"low{i}", 1)
    got: list[str] = []
    held: list[int] = []
    acking: list[bool] = []

    def on_message(c, m, p, b):
        got.append(b.decode())
        if acking:
            c.basic_ack(m.delivery_tag)
        else:
            held.append(m.delivery_tag)

    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(q, on_message)
    conn.process_data_events(0.2)
    assert got == ["low0"]  # one out; the rest wait in the queue
    pub = conn.channel()
    pub.confirm_delivery()  # confirmed = in the queue (RabbitMQ may otherwise see the ack first)
    publish(pub, q, "high", 9)  # arrive while the consumer is full
    publish(pub, q, "mid", 5)
    acking.append(True)
    ch.basic_ack(held[0])
    deadline = time.monotonic() + 5
    while len(got) < 5 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert got == ["low0", "high", "mid", "low1", "low2"]


def test_drop_head_on_a_priority_queue_drops_the_highest_priority_head(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-drop-{uid}", arguments={"x-max-priority": 5, "x-max-length": 2})
    publish(ch, q, "p1", 1)
    publish(ch, q, "p5", 5)
    publish(ch, q, "p3", 3)
    assert drain(ch, q) == ["p3", "p1"]


def test_an_expired_low_priority_message_waits_behind_higher_priority_ones(conn, ch, cleanup, uid):
    # RabbitMQ documents it: messages expire only from the head, the highest priority's head
    dlx = make_exchange(ch, cleanup, f"pr-dlx-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"pr-catch-{uid}")
    ch.queue_bind(catch, dlx)
    q = make_queue(ch, cleanup, f"pr-ttl-{uid}", arguments={"x-max-priority": 5, "x-dead-letter-exchange": dlx})
    publish(ch, q, "high", 5)
    publish(ch, q, "low-short", 1, expiration="100")
    time.sleep(0.5)
    assert message_count(conn, catch) == 0
    assert message_count(conn, q) == 2
    method, _, body = get(ch, q, auto_ack=True)
    assert body == b"high"
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    assert message_count(conn, q) == 0


def test_priority_and_headers_survive_publishing_through_an_exchange(ch, cleanup, uid):
    ex = make_exchange(ch, cleanup, f"pr-ex-{uid}", "fanout")
    q = make_queue(ch, cleanup, f"pr-viaex-{uid}", arguments={"x-max-priority": 3})
    ch.queue_bind(q, ex)
    ch.basic_publish(ex, "", b"a", pika.BasicProperties(priority=1, headers={"k": "v"}))
    ch.basic_publish(ex, "", b"b", pika.BasicProperties(priority=3))
    _, props, body = get(ch, q, auto_ack=True)
    assert body == b"b" and props.priority == 3
    _, props, body = get(ch, q, auto_ack=True)
    assert body == b"a" and props.priority == 1 and props.headers == {"k": "v"}


@pytest.mark.parametrize("value", [256, -1, "5", True])
def test_an_invalid_x_max_priority_is_refused_with_406(ch, uid, value):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"pr-bad-{uid}", arguments={"x-max-priority": value})
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_x_max_priority_255_is_accepted(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"pr-255-{uid}", arguments={"x-max-priority": 255})
    publish(ch, q, "a", 254)
    publish(ch, q, "b", 255)
    assert drain(ch, q) == ["b", "a"]


def test_a_durable_priority_queue_keeps_its_order_across_a_restart(start_broker, tmp_path, uid):
    from .helpers import connect
    b = start_broker()
    c = connect(b)
    chan = c.channel()
    chan.queue_declare("prio-durable", durable=True, arguments={"x-max-priority": 5})
    for body, p in (("a1", 1), ("b5", 5), ("c3", 3), ("d5", 5)):
        chan.basic_publish("", "prio-durable", body.encode(), pika.BasicProperties(priority=p, delivery_mode=2))
    c.close()
    b.stop()
    b2 = start_broker(data_dir=b.data_dir)
    c = connect(b2)
    try:
        assert drain(c.channel(), "prio-durable") == ["b5", "d5", "c3", "a1"]
    finally:
        c.close()
