"""Direct reply-to: the pseudo-queue ``amq.rabbitmq.reply-to`` (pika; RabbitMQ 3.10 is the reference).

A requester consumes from ``amq.rabbitmq.reply-to`` without acks and publishes requests with
``reply_to="amq.rabbitmq.reply-to"``; the responder sees the rewritten address
``amq.rabbitmq.reply-to.<token>`` and publishes its reply to the default exchange with it as
the routing key, which delivers straight to the requester's consumer.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from .helpers import NOT_ALLOWED, NOT_FOUND, PRECONDITION_FAILED, RABBITMQ, connect, get, new_queue

pytestmark = pytest.mark.timeout(60)

REPLY_TO = "amq.rabbitmq.reply-to"


class Requester:
    """A channel with a reply consumer that collects (method, properties, body)."""

    def __init__(self, conn, tag: str | None = None) -> None:
        self.conn = conn
        self.ch = conn.channel()
        self.replies: list = []
        self.tag = self.ch.basic_consume(REPLY_TO, lambda _c, m, p, b: self.replies.append((m, p, b)),
                                         auto_ack=True, consumer_tag=tag)

    def request(self, queue: str, body: bytes = b"req", **props) -> None:
        self.ch.basic_publish("", queue, body, pika.BasicProperties(reply_to=REPLY_TO, **props))

    def wait(self, n: int = 1, timeout: float = 5.0) -> list:
        deadline = time.monotonic() + timeout
        while len(self.replies) < n and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        return self.replies


def address_of(ch, queue: str) -> str:
    """The reply-to address of the request waiting in `queue`."""
    method, props, _ = get(ch, queue, auto_ack=True)
    assert method is not None, "request never arrived"
    return props.reply_to


def closed_with(ch, fn) -> tuple[int, str]:
    with pytest.raises(ChannelClosedByBroker) as ei:
        fn()
        ch.exchange_declare("amq.direct", passive=True)  # a round trip, for asynchronous errors
    return ei.value.reply_code, ei.value.reply_text


def test_rpc_round_trip(conn, broker):
    server = connect(broker)
    try:
        sch = server.channel()
        q = new_queue(sch)
        req = Requester(conn)
        req.request(q, b"what time is it", correlation_id="c-1")
        method, props, body = get(sch, q, auto_ack=True)
        assert body == b"what time is it" and props.correlation_id == "c-1"
        assert props.reply_to.startswith(REPLY_TO + ".") and len(props.reply_to) > len(REPLY_TO) + 1
        sch.basic_publish("", props.reply_to, b"noon", pika.BasicProperties(correlation_id=props.correlation_id))
        [(m, p, b)] = req.wait()
        assert (m.consumer_tag, m.exchange, m.routing_key, m.redelivered) == (req.tag, "", props.reply_to, False)
        assert (p.correlation_id, b) == ("c-1", b"noon")
    finally:
        server.close()


def test_rewrite_keeps_every_other_property(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q, correlation_id="c", headers={"n": 5, "s": "x", "t": {"in": [1, "a"]}},
                content_type="application/json", message_id="m", expiration="60000", priority=3,
                delivery_mode=2, timestamp=1_700_000_000, type="t", app_id="app")
    _, p, _ = get(req.ch, q, auto_ack=True)
    assert p.reply_to.startswith(REPLY_TO + ".")
    assert (p.correlation_id, p.headers, p.content_type, p.message_id, p.expiration, p.priority,
            p.delivery_mode, p.timestamp, p.type, p.app_id) == (
        "c", {"n": 5, "s": "x", "t": {"in": [1, "a"]}}, "application/json", "m", "60000", 3, 2,
        1_700_000_000, "t", "app")


def test_other_reply_to_values_are_untouched(conn):
    ch = conn.channel()
    q = new_queue(ch)
    for value in ("my-queue", REPLY_TO + "-not", REPLY_TO + ".abc"):
        ch.basic_publish("", q, b"x", pika.BasicProperties(reply_to=value))
        assert address_of(ch, q) == value


def test_each_channel_gets_its_own_replies(conn):
    a, b = Requester(conn), Requester(conn)
    q = new_queue(a.ch)
    a.request(q)
    addr_a = address_of(a.ch, q)
    b.request(q)
    addr_b = address_of(a.ch, q)
    assert addr_a != addr_b
    a.ch.basic_publish("", addr_b, b"for-b")
    a.ch.basic_publish("", addr_a, b"for-a")
    assert [x[2] for x in a.wait()] == [b"for-a"]
    assert [x[2] for x in b.wait()] == [b"for-b"]


def test_reply_on_the_requesting_channel_itself(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    req.ch.basic_publish("", address_of(req.ch, q), b"loop")
    assert [x[2] for x in req.wait()] == [b"loop"]


def test_many_replies_arrive_in_order(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    for i in range(100):
        req.ch.basic_publish("", addr, str(i).encode())
    assert [x[2] for x in req.wait(100)] == [str(i).encode() for i in range(100)]


def test_publishing_with_reply_to_without_a_reply_consumer_is_406(conn):
    ch = conn.channel()
    q = new_queue(ch)
    code, text = closed_with(ch, lambda: ch.basic_publish("", q, b"x", pika.BasicProperties(reply_to=REPLY_TO)))
    assert (code, text) == (PRECONDITION_FAILED, "PRECONDITION_FAILED - fast reply consumer does not exist")


def test_reply_consumer_on_another_channel_does_not_count(conn):
    Requester(conn)
    ch = conn.channel()
    q = new_queue(ch)
    code, _ = closed_with(ch, lambda: ch.basic_publish("", q, b"x", pika.BasicProperties(reply_to=REPLY_TO)))
    assert code == PRECONDITION_FAILED


def test_reply_consumer_with_acks_is_406(conn):
    ch = conn.channel()
    code, text = closed_with(ch, lambda: ch.basic_consume(REPLY_TO, lambda *a: None, auto_ack=False))
    assert (code, text) == (PRECONDITION_FAILED, "PRECONDITION_FAILED - reply consumer cannot acknowledge")


def test_second_reply_consumer_on_a_channel_is_406(conn):
    req = Requester(conn)
    code, text = closed_with(req.ch, lambda: req.ch.basic_consume(REPLY_TO, lambda *a: None, auto_ack=True))
    assert (code, text) == (PRECONDITION_FAILED, "PRECONDITION_FAILED - reply consumer already set")


def test_reply_consumer_reusing_a_consumer_tag_is_530(conn, broker):
    ch = conn.channel()
    q = new_queue(ch)
    ch.basic_consume(q, lambda *a: None, auto_ack=True, consumer_tag="taken")
    with pytest.raises(Exception):
        ch.basic_consume(REPLY_TO, lambda *a: None, auto_ack=True, consumer_tag="taken")
        ch.exchange_declare("amq.direct", passive=True)
    # pika refuses a duplicate tag itself; ask the broker through py-amqp
    from .helpers import amqp_connect
    c = amqp_connect(broker)
    try:
        ach = c.channel()
        q2 = ach.queue_declare("", exclusive=True).queue
        ach.basic_consume(q2, consumer_tag="taken", no_ack=True)
        with pytest.raises(Exception) as ei:
            ach.basic_consume(REPLY_TO, consumer_tag="taken", no_ack=True)
        assert getattr(ei.value, "reply_code", None) == NOT_ALLOWED
    finally:
        try:
            c.close()
        except Exception:
            pass


def test_cancelled_reply_consumer_stops_replies_and_rewrites(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    req.ch.basic_cancel(req.tag)
    other = conn.channel()
    other.basic_publish("", addr, b"late")
    conn.process_data_events(time_limit=0.3)
    assert req.replies == []
    code, text = closed_with(req.ch, lambda: req.request(q))
    assert code == PRECONDITION_FAILED


def test_reply_consumer_can_be_set_again_after_cancel(conn):
    req = Requester(conn)
    req.ch.basic_cancel(req.tag)
    replies = []
    req.ch.basic_consume(REPLY_TO, lambda _c, m, p, b: replies.append(b), auto_ack=True)
    q = new_queue(req.ch)
    req.request(q)
    req.ch.basic_publish("", address_of(req.ch, q), b"again")
    deadline = time.monotonic() + 5
    while not replies and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    assert replies == [b"again"]


def test_mandatory_reply_to_a_closed_channel_is_returned(conn, broker):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    req.ch.close()
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", addr, b"dropped")  # not mandatory: silently dropped
    with pytest.raises(UnroutableError):
        ch.basic_publish("", addr, b"returned", mandatory=True)


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 returns a mandatory direct reply even when it delivers it")
def test_mandatory_reply_that_is_delivered_is_not_returned(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", addr, b"ok", mandatory=True)
    assert [x[2] for x in req.wait()] == [b"ok"]


def test_unknown_reply_address_is_unroutable(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    with pytest.raises(UnroutableError):
        ch.basic_publish("", REPLY_TO + ".no-such-token", b"x", mandatory=True)


def test_reply_address_is_only_reachable_through_the_default_exchange(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    ch = conn.channel()
    ch.basic_publish("amq.direct", addr, b"wrong-exchange")
    ch.basic_publish("", addr, b"right")
    assert [x[2] for x in req.wait()] == [b"right"]
    conn.process_data_events(time_limit=0.2)
    assert len(req.replies) == 1


def test_declaring_the_pseudo_queue_reports_one_consumer(conn):
    ch = conn.channel()
    for passive in (True, False):
        ok = ch.queue_declare(REPLY_TO, passive=passive).method
        assert (ok.queue, ok.message_count, ok.consumer_count) == (REPLY_TO, 0, 1)


def test_declaring_a_live_reply_address_succeeds_and_an_unknown_one_is_404(conn):
    req = Requester(conn)
    q = new_queue(req.ch)
    req.request(q)
    addr = address_of(req.ch, q)
    ok = conn.channel().queue_declare(addr, passive=True).method
    assert (ok.queue, ok.message_count, ok.consumer_count) == (addr, 0, 1)
    ch = conn.channel()
    code, _ = closed_with(ch, lambda: ch.queue_declare(REPLY_TO + ".unknown", passive=True))
    assert code == NOT_FOUND


@pytest.mark.parametrize("op", ["get", "bind"])
def test_other_queue_methods_do_not_know_the_pseudo_queue(conn, op):
    ch = conn.channel()
    if op == "get":
        code, _ = closed_with(ch, lambda: ch.basic_get(REPLY_TO))
    else:
        code, _ = closed_with(ch, lambda: ch.queue_bind(REPLY_TO, "amq.direct", "k"))
    assert code == NOT_FOUND
