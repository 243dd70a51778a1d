"""Any node serves any queue (issue 32, item 3): a client connected to node b declares, publishes
to, gets from, consumes from, acks, requeues and purges a queue that lives on node a; with real
etcd, real nodes and pika. Waits are on what a client or the HTTP API sees, never on time.

Checked: confirmed publishes through node b are on node a's queue (counted by a client of node
a); a passive declare through b counts them; an inequivalent redeclare is refused 406 by a's
check; an exclusive declare of another node's queue is 405; basic.get and basic.ack through b
take them off a's queue; a consumer on b with a prefetch of 2 holds 2 unacked at a time; a
channel closed with unacked messages puts them back (redelivered); a binding made through b
routes b's publishes to a's queue; purge and delete through b; a node that goes cancels the
consumers of its queues elsewhere, and nodes still serve their own queues.
"""

from __future__ import annotations

import signal

import pika
import pytest

from tests.cluster.cluster_nodes import api, wait_until

TIMEOUT_S = 30.0


def connect(node) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(node.url))


def depth(conn: pika.BlockingConnection, name: str) -> int:
    return conn.channel().queue_declare(name, passive=True).method.message_count


def known_on(node, name: str) -> None:
    """Wait until ``node`` serves ``name`` (a passive declare through it answers)."""
    def served():
        conn = connect(node)
        try:
            conn.channel().queue_declare(name, passive=True)
            return True
        except pika.exceptions.ChannelClosedByBroker:
            return False
        finally:
            if conn.is_open:
                conn.close()
    wait_until(served, TIMEOUT_S, f"node serving queue {name}")


def test_a_client_of_node_b_uses_a_queue_of_node_a(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    name = f"on-a-{uid}"
    on_a = connect(a)
    on_a.channel().queue_declare(name, durable=True)
    on_b = connect(b)
    try:
        ch = on_b.channel()
        # declared on a, answered there: b serves it as soon as a's declare-ok came
        assert ch.queue_declare(name, passive=True).method.message_count == 0
        assert ch.queue_declare(name, durable=True).method.message_count == 0  # equivalent: ok
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", name, f"m{i}".encode(), pika.BasicProperties(delivery_mode=2), mandatory=True)
        assert depth(on_a, name) == 20  # on node a, counted there
        assert ch.queue_declare(name, passive=True).method.message_count == 20

        # a's equivalence check, through b
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            on_b.channel().queue_declare(name, durable=False)
        assert refused.value.reply_code == 406 and "inequivalent arg 'durable'" in refused.value.reply_text
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as locked:
            on_b.channel().queue_declare(name, durable=True, exclusive=True)
        assert locked.value.reply_code == 405

        # get and ack through b
        ch = on_b.channel()
        method, _, body = ch.basic_get(name)
        assert body == b"m0" and method.message_count == 19
        ch.basic_ack(method.delivery_tag)
        method, _, body = ch.basic_get(name, auto_ack=True)
        assert body == b"m1"
        assert depth(on_a, name) == 18

        # a consumer on b with a prefetch of 2: two unacked at a time, acks let the rest come
        ch.basic_qos(prefetch_count=2)
        got = []

        def on_message(channel, method, properties, body):
            got.append((method.delivery_tag, body))
        tag = ch.basic_consume(name, on_message)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), len(got) >= 2)[1], TIMEOUT_S, "two deliveries")
        on_b.process_data_events(time_limit=0.3)
        assert len(got) == 2  # the prefetch holds the third back
        for delivery_tag, _ in list(got):
            ch.basic_ack(delivery_tag)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), len(got) >= 4)[1], TIMEOUT_S, "two more")
        assert [body for _, body in got[:4]] == [b"m2", b"m3", b"m4", b"m5"]
        ch.basic_cancel(tag)
        # two unacked when the channel closes: back on a's queue, redelivered
        ch.close()
        wait_until(lambda: depth(on_a, name) == 16, TIMEOUT_S, "the unacked two back on node a's queue")
        ch = on_b.channel()
        method, _, body = ch.basic_get(name, auto_ack=True)
        assert body == b"m4" and method.redelivered

        # a binding made through b routes b's publishes to a's queue
        ch.queue_bind(name, "amq.direct", routing_key=f"k-{uid}")
        ch.confirm_delivery()
        ch.basic_publish("amq.direct", f"k-{uid}", b"routed", pika.BasicProperties(delivery_mode=2), mandatory=True)
        assert depth(on_a, name) == 16
        assert ch.queue_purge(name).method.message_count == 16
        assert depth(on_a, name) == 0

        # deleted through b: gone from a
        ch.basic_publish("", name, b"last", pika.BasicProperties(delivery_mode=2))
        assert ch.queue_delete(name).method.message_count == 1
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as missing:
            on_a.channel().queue_declare(name, passive=True)
        assert missing.value.reply_code == 404
    finally:
        for conn in (on_a, on_b):
            if conn.is_open:
                conn.close()


def test_a_node_that_goes_cancels_the_consumers_of_its_queues(etcd1, nodes, cluster_name, uid):
    a = nodes.start(etcd1.endpoints, cluster_name, "a")
    b = nodes.start(etcd1.endpoints, cluster_name, "b")
    on_a = connect(a)
    on_a.channel().queue_declare(f"q-{uid}", durable=True)
    on_a.close()
    on_b = connect(b)
    try:
        ch = on_b.channel()
        ch.queue_declare(f"own-{uid}")
        cancelled = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        tag = ch.basic_consume(f"q-{uid}", lambda *args: None)
        a.signal(signal.SIGKILL)
        wait_until(lambda: (on_b.process_data_events(time_limit=0.1), cancelled)[1], TIMEOUT_S,
                   "basic.cancel of the consumer of node a's queue")
        assert cancelled == [tag]
        # node b goes on serving its own queue; a's durable queue is refused as RabbitMQ 3.10 does
        ch.basic_publish("", f"own-{uid}", b"x")
        assert ch.queue_declare(f"own-{uid}", passive=True).method.message_count == 1
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as down:
            ch.queue_declare(f"q-{uid}", durable=True)
        assert down.value.reply_code == 404 and "is down or inaccessible" in down.value.reply_text
        rows = wait_until(lambda: [q for q in api(b, "queues") if q["name"] == f"q-{uid}" and q.get("state") == "down"],
                          TIMEOUT_S, "node a's queue listed down")
        assert rows[0]["node"] == "a"
    finally:
        if on_b.is_open:
            on_b.close()
