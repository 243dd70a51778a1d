"""Deleting a queue the same channel consumes from (issue 12 point 5).

RabbitMQ answers queue.delete-ok first and sends the consumer's basic.cancel after it; with
the cancel first, py-amqp (and so kombu) raise ConsumerCancelled inside ``queue_delete``. Warren
holds the cancel notifications of the deleting connection's consumers until its delete-ok is
out (RabbitMQ's order for consumers on the connection's other channels is a race; there,
Warren's is the same, delete-ok first). Other connections' consumers are told at once.
"""

from __future__ import annotations

import amqp
import kombu
import pytest

from . import rawamqp as raw
from .helpers import amqp_connect

BASIC_CANCEL = (60, 30)


def test_delete_ok_comes_before_the_cancel_of_the_deleting_channels_consumer(broker, uid):
    q = f"del-order-{uid}"
    props = {"product": "warren-rawamqp", "capabilities": {"consumer_cancel_notify": True}}
    with raw.RawConnection(broker.host, broker.port) as c:
        c.send(raw.PROTOCOL_HEADER)
        c.expect(raw.CONNECTION_START)
        c.send(raw.start_ok(client_properties=props))
        tune = raw.parse_tune(c.expect(raw.CONNECTION_TUNE))
        c.send(raw.tune_ok(tune.channel_max, tune.frame_max, 0) + raw.connection_open("/"))
        c.expect(raw.CONNECTION_OPEN_OK)
        c.open_channel(1)
        c.declare_queue(1, q)
        c.send(raw.basic_consume(1, q, "mine"))
        c.expect(raw.BASIC_CONSUME_OK, 1)
        c.send(raw.queue_delete(1, q))
        first, second = c.read_method(), c.read_method()
        assert (first.channel, first.method) == (1, raw.QUEUE_DELETE_OK)
        assert (second.channel, second.method) == (1, BASIC_CANCEL)
        assert raw.Reader(second.args).shortstr() == "mine"
        c.close_connection()


def test_py_amqp_queue_delete_returns_and_the_cancel_callback_runs_after(broker, uid):
    q = f"del-pyamqp-{uid}"
    events = []
    conn = amqp_connect(broker)
    try:
        ch = conn.channel()
        ch.queue_declare(q)
        ch.basic_publish(amqp.Message(b"one"), routing_key=q)
        tag = ch.basic_consume(q, callback=lambda m: events.append(("message", m.body)),
                               on_cancel=lambda t: events.append(("cancelled", t)))
        conn.drain_events(timeout=5)
        assert ch.queue_delete(q) == 0  # the unacked message is not counted, as RabbitMQ
        events.append(("deleted", q))
        conn.drain_events(timeout=5)
        assert events == [("message", b"one"), ("deleted", q), ("cancelled", tag)]
    finally:
        conn.close()


def test_kombu_deletes_the_queue_it_consumes_from(broker, uid):
    name = f"del-kombu-{uid}"
    with kombu.Connection(f"amqp://guest:guest@{broker.host}:{broker.port}//", connect_timeout=10) as kc:
        ch = kc.channel()
        queue = kombu.Queue(name, exchange=kombu.Exchange(name, "direct", auto_delete=True), routing_key=name)
        bound = queue(ch)
        bound.declare()
        kombu.Producer(ch).publish({"n": 1}, exchange=name, routing_key=name)
        got = []
        consumer = kombu.Consumer(ch, queues=[queue], callbacks=[lambda body, msg: (got.append(body), msg.ack())])
        consumer.consume()
        kc.drain_events(timeout=5)
        assert got == [{"n": 1}]
        assert bound.delete() == 0  # no ConsumerCancelled from inside queue_delete
        # the broker's cancel arrives next, where the application drains events (as on RabbitMQ)
        with pytest.raises(amqp.exceptions.ConsumerCancelled):
            kc.drain_events(timeout=5)
        consumer.cancel()
