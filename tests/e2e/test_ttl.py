"""Message TTL (x-message-ttl, expiration), TTL 0 and queue expiry (x-expires) with pika;
RabbitMQ is the reference.

Expired messages are observed through a dead-letter exchange, so what is checked is the
broker's own timer (nobody reads the queue that holds them), not the check at the head that
every basic.get or declare also makes.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import (
    PRECONDITION_FAILED, connect, exists, get, make_exchange, make_queue, message_count, wait_until,
)

pytestmark = pytest.mark.timeout(60)


def ttl_queue(ch, cleanup, uid: str, name: str, **arguments) -> tuple[str, str]:
    """Queue `name`-`uid` with `arguments` that dead-letters into a catch queue: (queue, catch)."""
    dlx = make_exchange(ch, cleanup, f"ttl-dlx-{name}-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"ttl-catch-{name}-{uid}")
    ch.queue_bind(catch, dlx)
    q = make_queue(ch, cleanup, f"ttl-{name}-{uid}", arguments={"x-dead-letter-exchange": dlx, **arguments})
    return q, catch


def bodies(ch, queue: str) -> list[bytes]:
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


# --------------------------------------------------------------------------- message TTL


def test_messages_expire_on_a_timer_when_nobody_reads_the_queue(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "timer", **{"x-message-ttl": 150})
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    assert wait_until(lambda: message_count(conn, catch) == 3, timeout=5)
    assert bodies(ch, catch) == [b"m0", b"m1", b"m2"]
    assert message_count(conn, q) == 0


def test_the_lower_of_queue_ttl_and_message_expiration_applies(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "lower", **{"x-message-ttl": 60000})
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="100"))
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    q2, catch2 = ttl_queue(ch, cleanup, uid, "lower2", **{"x-message-ttl": 100})
    ch.basic_publish("", q2, b"long", pika.BasicProperties(expiration="60000"))
    assert wait_until(lambda: message_count(conn, catch2) == 1, timeout=5)


def test_a_message_expires_only_when_it_reaches_the_head(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "head")
    ch.basic_publish("", q, b"long", pika.BasicProperties(expiration="60000"))
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="50"))
    time.sleep(0.5)
    assert message_count(conn, q) == 2  # "short" waits behind "long", as in RabbitMQ
    assert message_count(conn, catch) == 0
    method, _, body = get(ch, q, auto_ack=True)
    assert body == b"long"
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    assert message_count(conn, q) == 0


def test_messages_expire_while_a_consumer_is_attached_but_full(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "busy", **{"x-message-ttl": 300})
    got = []
    ch.basic_qos(prefetch_count=1)
    ch.basic_consume(q, lambda c, m, p, b: got.append((m.delivery_tag, b)))
    for i in range(3):
        ch.basic_publish("", q, f"m{i}".encode())
    conn.process_data_events(0.2)
    assert [b for _, b in got] == [b"m0"]  # prefetch 1: m1 and m2 wait (and expire) in the queue
    deadline = time.monotonic() + 5
    while message_count(conn, catch) < 2 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert message_count(conn, catch) == 2
    ch.basic_ack(got[0][0])  # the delivered one never expires: it left the queue
    conn.process_data_events(0.3)
    assert [b for _, b in got] == [b"m0"]
    assert message_count(conn, q) == 0


def test_a_consumer_that_keeps_up_receives_messages_before_they_expire(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "fast", **{"x-message-ttl": 2000})
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    for i in range(5):
        ch.basic_publish("", q, f"m{i}".encode())
    deadline = time.monotonic() + 5
    while len(got) < 5 and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert got == [f"m{i}".encode() for i in range(5)]
    assert message_count(conn, catch) == 0


def test_a_requeued_message_keeps_its_original_expiry(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "requeue", **{"x-message-ttl": 400})
    ch.basic_publish("", q, b"x")
    method, _, _ = get(ch, q)
    time.sleep(0.6)  # past its TTL while it was out
    ch.basic_nack(method.delivery_tag, requeue=True)
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    assert message_count(conn, q) == 0


def test_a_ttl_of_zero_delivers_to_a_waiting_consumer(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "zero", **{"x-message-ttl": 0})
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(b), auto_ack=True)
    ch.basic_publish("", q, b"now")
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        conn.process_data_events(0.1)
    assert got == [b"now"]
    assert message_count(conn, catch) == 0


def test_a_ttl_of_zero_expires_at_once_without_a_consumer(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "zero-none", **{"x-message-ttl": 0})
    ch.basic_publish("", q, b"gone")
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    assert message_count(conn, q) == 0


def test_an_expiration_of_zero_expires_at_once_without_a_consumer(conn, ch, cleanup, uid):
    q, catch = ttl_queue(ch, cleanup, uid, "zero-msg")
    ch.basic_publish("", q, b"gone", pika.BasicProperties(expiration="0"))
    ch.basic_publish("", q, b"kept")
    assert wait_until(lambda: message_count(conn, catch) == 1, timeout=5)
    assert bodies(ch, q) == [b"kept"]


def test_an_invalid_expiration_is_refused_with_406(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"ttl-bad-{uid}")
    ch.basic_publish("", q, b"x", pika.BasicProperties(expiration="soon"))
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(q, passive=True)
    assert ei.value.reply_code == PRECONDITION_FAILED


# --------------------------------------------------------------------------- queue expiry
# A passive declare is a use that restarts the x-expires clock: these tests wait, then look once.


def gone_after(conn, name: str, seconds: float) -> bool:
    time.sleep(seconds)
    return not exists(conn, "queue", name)


def test_an_unused_queue_with_x_expires_is_deleted(conn, ch, cleanup, uid):
    name = make_queue(ch, cleanup, f"ttl-qexp-{uid}", arguments={"x-expires": 300})
    ch.basic_publish("", name, b"messages do not keep it alive")
    assert gone_after(conn, name, 1.0)


def test_a_queue_with_a_consumer_does_not_expire_and_the_clock_starts_when_it_leaves(broker, conn, ch, cleanup, uid):
    name = make_queue(ch, cleanup, f"ttl-qcons-{uid}", arguments={"x-expires": 300})
    other = connect(broker)
    try:
        och = other.channel()
        och.basic_consume(name, lambda *a: None)
        time.sleep(0.8)
        assert exists(conn, "queue", name)
        other.close()
        assert gone_after(conn, name, 1.0)
    finally:
        if other.is_open:
            other.close()


def test_declares_and_basic_get_keep_a_queue_with_x_expires_alive(conn, ch, cleanup, uid):
    name = make_queue(ch, cleanup, f"ttl-qtouch-{uid}", arguments={"x-expires": 600})
    for i in range(6):
        time.sleep(0.25)
        if i % 2:
            ch.basic_get(name, auto_ack=True)
        else:
            ch.queue_declare(name, passive=True)
    assert exists(conn, "queue", name)
    assert gone_after(conn, name, 1.2)


def test_an_expired_queue_does_not_dead_letter_its_messages(conn, ch, cleanup, uid):
    dlx = make_exchange(ch, cleanup, f"ttl-qdl-x-{uid}", "fanout")
    catch = make_queue(ch, cleanup, f"ttl-qdl-c-{uid}")
    ch.queue_bind(catch, dlx)
    name = make_queue(ch, cleanup, f"ttl-qdl-{uid}", arguments={"x-expires": 200, "x-dead-letter-exchange": dlx})
    ch.basic_publish("", name, b"x")
    assert gone_after(conn, name, 1.0)
    assert message_count(conn, catch) == 0


@pytest.mark.parametrize("value", [0, -1, "1000"])
def test_an_invalid_x_expires_is_refused_with_406(ch, uid, value):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_declare(f"ttl-qbad-{uid}", arguments={"x-expires": value})
    assert ei.value.reply_code == PRECONDITION_FAILED
