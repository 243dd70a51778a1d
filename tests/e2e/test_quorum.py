"""Queue types and quorum queues (issue 12 point 6) through pika.

The declare answers are RabbitMQ 3.10.8's, and these tests pass against it too
(WARREN_TEST_BROKER_URL). What RabbitMQ 3.10 does not have is skipped there with the reason:
RabbitMQ 4's default delivery limit and two priority levels, and the tests that restart a
private Warren.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, NackError

from .helpers import (
    PRECONDITION_FAILED, RABBITMQ, connect, get, make_exchange, make_queue, message_count, wait_until,
)

pytestmark = pytest.mark.timeout(60)

NOT_IMPLEMENTED = 540
Q = {"x-queue-type": "quorum"}


def refusal(conn, name: str, **kw) -> tuple[int, str]:
    """(reply code, text) of a queue.declare the broker refuses, on a new channel of `conn`."""
    chan = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        chan.queue_declare(name, **kw)
    return ei.value.reply_code, ei.value.reply_text


def quorum(ch, cleanup, name: str, **arguments) -> str:
    return make_queue(ch, cleanup, name, durable=True, arguments={**Q, **arguments})


# --------------------------------------------------------------------------- declare


@pytest.mark.parametrize("value, detail", [
    ("foo", "\"unsupported queue type 'foo'\""), ("Quorum", "\"unsupported queue type 'Quorum'\""),
    (5, "{unacceptable_type,signedint}"),
])
def test_an_unknown_queue_type_is_refused_with_rabbitmqs_text(conn, uid, value, detail):
    name = f"qt-bad-{uid}"
    assert refusal(conn, name, durable=True, arguments={"x-queue-type": value}) == (
        PRECONDITION_FAILED, f"PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue '{name}' in vhost '/': {detail}")


@pytest.mark.parametrize("kw, prop", [
    ({"durable": False}, "non-durable"), ({"durable": True, "exclusive": True}, "exclusive-owner"),
    ({"durable": True, "auto_delete": True}, "auto-delete"),
    ({"durable": False, "exclusive": True, "auto_delete": True}, "auto-delete"),
])
def test_a_quorum_queue_is_durable_not_exclusive_not_auto_delete(conn, uid, kw, prop):
    name = f"qq-prop-{uid}"
    assert refusal(conn, name, arguments=Q, **kw) == (
        PRECONDITION_FAILED, f"PRECONDITION_FAILED - invalid property '{prop}' for queue '{name}' in vhost '/'")


def test_a_quorum_queue_cannot_be_server_named(conn):
    assert refusal(conn, "", durable=True, arguments=Q) == (
        PRECONDITION_FAILED, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue")


@pytest.mark.parametrize("arguments, key", [
    ({"x-max-priority": 5}, "x-max-priority"), ({"x-queue-mode": "lazy"}, "x-queue-mode"),
    ({"x-max-age": "1D"}, "x-max-age"), ({"x-queue-mode": "lazy", "x-max-priority": 5}, "x-queue-mode"),
    ({"x-max-priority": "a"}, "x-max-priority"),
])
def test_arguments_of_other_queue_types_are_refused_before_the_properties(conn, uid, arguments, key):
    name = f"qq-arg-{uid}"
    assert refusal(conn, name, durable=False, arguments={**Q, **arguments}) == (
        PRECONDITION_FAILED,
        f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{name}' in vhost '/' of queue type rabbit_quorum_queue")


@pytest.mark.parametrize("arguments, detail", [
    ({"x-dead-letter-strategy": "bogus"}, "'x-dead-letter-strategy' for queue '{}' in vhost '/': invalid_dlx_strategy"),
    ({"x-overflow": "bogus", "x-max-priority": 5}, "'x-overflow' for queue '{}' in vhost '/': invalid_overflow"),
    ({"x-quorum-initial-group-size": 0}, "'x-quorum-initial-group-size' for queue '{}' in vhost '/': {{value_zero,0}}"),
    ({"x-dead-letter-routing-key": "k"},
     "'x-dead-letter-routing-key' for queue '{}' in vhost '/': routing_key_but_no_dlx_defined"),
])
def test_quorum_argument_values_are_checked_first(conn, uid, arguments, detail):
    name = f"qq-val-{uid}"
    assert refusal(conn, name, durable=False, arguments={**Q, **arguments}) == (
        PRECONDITION_FAILED, "PRECONDITION_FAILED - invalid arg " + detail.format(name))


@pytest.mark.parametrize("key, value", [
    ("x-dead-letter-strategy", "at-least-once"), ("x-quorum-initial-group-size", 3), ("x-max-age", "1D"),
])
def test_a_classic_queue_refuses_quorum_and_stream_arguments(conn, uid, key, value):
    name = f"cq-arg-{uid}"
    for arguments in ({key: value}, {"x-queue-type": "classic", key: value}):
        assert refusal(conn, name, durable=True, arguments=arguments) == (
            PRECONDITION_FAILED,
            f"PRECONDITION_FAILED - invalid arg '{key}' for queue '{name}' in vhost '/' of queue type rabbit_classic_queue")


def test_quorum_arguments_rabbitmq_accepts(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-ok-{uid}", **{
        "x-delivery-limit": 3, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
        "x-max-length": 10, "x-max-in-memory-length": 5, "x-quorum-initial-group-size": 3,
        "x-queue-leader-locator": "balanced", "x-single-active-consumer": True, "x-message-ttl": 60000,
        "x-expires": 600000, "x-dead-letter-exchange": "nowhere", "x-custom": "kept"})
    ok = ch.queue_declare(q, passive=True)
    assert ok.method.message_count == 0


def test_equivalence_classic_is_the_default_type_and_quorum_is_not(conn, ch, cleanup, uid):
    c = make_queue(ch, cleanup, f"eq-classic-{uid}", durable=True)
    ch.queue_declare(c, durable=True, arguments={"x-queue-type": "classic"})  # the same queue
    t = make_queue(ch, cleanup, f"eq-typed-{uid}", durable=True, arguments={"x-queue-type": "classic"})
    ch.queue_declare(t, durable=True)
    q = quorum(ch, cleanup, f"eq-quorum-{uid}")
    ch.queue_declare(q, durable=True, arguments=Q)
    ch.queue_declare(q, passive=True)
    assert refusal(conn, q, durable=True) == (
        PRECONDITION_FAILED, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '{q}' in vhost '/': "
                             "received none but current is the value 'quorum' of type 'longstr'")
    assert refusal(conn, q, durable=True, arguments={"x-queue-type": "classic"}) == (
        PRECONDITION_FAILED, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '{q}' in vhost '/': "
                             "received 'classic' but current is 'quorum'")
    assert refusal(conn, c, durable=True, arguments=Q)[0] == PRECONDITION_FAILED


# --------------------------------------------------------------------------- semantics


def test_a_consumer_on_a_channel_with_global_qos_is_refused_with_540(broker, ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-gqos-{uid}")
    c = connect(broker)
    try:
        chan = c.channel()
        chan.basic_qos(prefetch_count=5, global_qos=True)
        with pytest.raises(ConnectionClosedByBroker) as ei:
            chan.basic_consume(q, lambda *a: None)
        assert ei.value.reply_code == NOT_IMPLEMENTED
        assert ei.value.reply_text == f"NOT_IMPLEMENTED - queue '{q}' in vhost '/' does not support global qos"
    finally:
        if c.is_open:
            c.close()
    chan = connect(broker).channel()  # per-consumer prefetch is fine
    chan.basic_qos(prefetch_count=5)
    chan.basic_consume(q, lambda *a: None)
    chan.connection.close()


def test_delivery_count_on_redeliveries_and_gets(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-count-{uid}", **{"x-delivery-limit": 2})
    ch.basic_publish("", q, b"m", pika.BasicProperties(headers={"mine": 1}))
    seen = []
    for _ in range(4):
        method, props, _ = get(ch, q, timeout=2)
        if method is None:
            break
        seen.append((props.headers.get("x-delivery-count"), method.redelivered))
        ch.basic_nack(method.delivery_tag, requeue=True)
    assert seen == [(0, False), (1, True), (2, True)]  # the third return passed the limit: gone


def test_reject_publish_refuses_once_over_the_limit_until_drained_to_80_percent(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-rp-{uid}", **{"x-max-length": 10, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    outcomes = []
    for i in range(12):
        try:
            ch.basic_publish("", q, str(i).encode())
            outcomes.append("ok")
        except NackError:
            outcomes.append("nack")
    # RabbitMQ's quorum queue takes one past the limit (it refuses once over it)
    assert outcomes == ["ok"] * 11 + ["nack"]
    for _ in range(2):
        assert get(ch, q, auto_ack=True)[0] is not None
    with pytest.raises(NackError):  # 9 ready: still above 80 % of 10
        ch.basic_publish("", q, b"late")
    assert get(ch, q, auto_ack=True)[0] is not None
    ch.basic_publish("", q, b"again")  # 8 ready: taken again
    assert wait_until(lambda: message_count(ch.connection, q) == 9)


def test_reject_publish_dlx_is_drop_head_on_a_quorum_queue(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-rpdlx-{uid}", **{"x-max-length": 2, "x-overflow": "reject-publish-dlx"})
    ch.confirm_delivery()
    for i in range(4):
        ch.basic_publish("", q, str(i).encode())  # never refused
    assert wait_until(lambda: message_count(ch.connection, q) == 2)
    assert get(ch, q, auto_ack=True)[2] == b"2"


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 has no default delivery limit (RabbitMQ 4's 20 is Warren's)")
def test_the_default_delivery_limit_is_20(ch, cleanup, uid):
    dlx = make_exchange(ch, cleanup, f"qq-dl20-dlx-{uid}", "fanout")
    dead = make_queue(ch, cleanup, f"qq-dl20-dead-{uid}")
    ch.queue_bind(dead, dlx)
    q = quorum(ch, cleanup, f"qq-dl20-{uid}", **{"x-dead-letter-exchange": dlx})
    ch.basic_publish("", q, b"poison")
    counts = []
    while True:
        method, props, _ = get(ch, q, timeout=1)
        if method is None:
            break
        counts.append(props.headers["x-delivery-count"])
        ch.basic_nack(method.delivery_tag, requeue=True)
    assert counts == list(range(21))
    _, props, body = get(ch, dead, auto_ack=True)
    assert body == b"poison" and props.headers["x-death"][0]["reason"] == "delivery_limit"


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 drops the message at its first return with -1 (RabbitMQ 4: no limit, Warren's)")
def test_a_negative_delivery_limit_means_none(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-nolimit-{uid}", **{"x-delivery-limit": -1})
    ch.basic_publish("", q, b"m")
    for n in range(25):
        method, props, _ = get(ch, q, timeout=2)
        assert method is not None and props.headers["x-delivery-count"] == n
        ch.basic_nack(method.delivery_tag, requeue=True)


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10's quorum queues have no priorities (RabbitMQ 4's two levels are Warren's)")
def test_two_priority_levels_high_twice_then_the_older(ch, cleanup, uid):
    q = quorum(ch, cleanup, f"qq-prio-{uid}")
    for i, p in enumerate([0, 9, 1, 5, None, 7, 4, 6]):
        ch.basic_publish("", q, f"{i}".encode(), pika.BasicProperties(priority=p))
    got = [get(ch, q, auto_ack=True)[2].decode() for _ in range(8)]
    # high: 1 3 5 7 (priority > 4); normal: 0 2 4 6; two high, then the older head, and so on
    assert got == ["1", "3", "0", "5", "7", "2", "4", "6"]


@pytest.mark.skipif(RABBITMQ, reason="RabbitMQ 3.10 retries an unroutable at-least-once dead letter only every few minutes")
def test_at_least_once_dead_letters_wait_until_the_target_has_them(ch, cleanup, uid):
    dlx = f"qq-alo-dlx-{uid}"
    cleanup["exchanges"].append(dlx)
    q = quorum(ch, cleanup, f"qq-alo-{uid}", **{
        "x-dead-letter-exchange": dlx, "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
        "x-max-length": 2})
    ch.basic_publish("", q, b"dies")
    method, _, _ = get(ch, q)
    ch.basic_reject(method.delivery_tag, requeue=False)
    assert message_count(ch.connection, q) == 0
    ch.confirm_delivery()
    ch.basic_publish("", q, b"a")
    with pytest.raises(NackError):  # the waiting dead letter counts towards the limit (as RabbitMQ)
        ch.basic_publish("", q, b"b")
        ch.basic_publish("", q, b"c")
    target = quorum(ch, cleanup, f"qq-alo-target-{uid}")
    ch.exchange_declare(dlx, "fanout")
    ch.queue_bind(target, dlx)
    _, props, body = get(ch, target, auto_ack=True, timeout=5)  # forwarded by the next retry
    assert body == b"dies" and props.headers["x-death"][0]["reason"] == "rejected"


def test_transient_messages_are_stored_and_delivery_counts_survive_a_restart(start_broker, tmp_path):
    if RABBITMQ:
        pytest.skip("restarts a private Warren")
    data = tmp_path / "qq-data"
    b = start_broker(data_dir=data)
    c = connect(b)
    chan = c.channel()
    chan.confirm_delivery()
    chan.queue_declare("qq-restart", durable=True, arguments=Q)
    chan.basic_publish("", "qq-restart", b"transient", pika.BasicProperties(delivery_mode=1))
    chan.basic_publish("", "qq-restart", b"second", pika.BasicProperties(delivery_mode=1))
    for _ in range(2):  # "transient" returned twice
        method, _, _ = get(chan, "qq-restart")
        chan.basic_nack(method.delivery_tag, requeue=True)
    method, props, body = get(chan, "qq-restart")
    assert body == b"transient" and props.headers["x-delivery-count"] == 2
    out = chan.basic_get("qq-restart")  # "second" stays out (unacked) when the broker dies
    assert out[2] == b"second"
    time.sleep(0.3)  # the return marks reach the disk with the next flush
    b.proc.kill()
    b.proc.wait()
    b = start_broker(data_dir=data)
    chan = connect(b).channel()
    method, props, body = get(chan, "qq-restart")
    assert body == b"transient" and props.delivery_mode == 1 and method.redelivered
    assert props.headers["x-delivery-count"] == 3  # 2 returns + the one out at the crash
    method2, props2, body2 = get(chan, "qq-restart")
    assert body2 == b"second" and props2.headers["x-delivery-count"] == 1 and method2.redelivered
    chan.basic_nack(method.delivery_tag, multiple=True, requeue=True)
    chan.connection.close()
    b.signal(signal.SIGTERM)
    assert b.wait() == 0
    b = start_broker(data_dir=data)
    chan = connect(b).channel()
    _, props, body = get(chan, "qq-restart", auto_ack=True)
    assert body == b"transient" and props.headers["x-delivery-count"] == 4
    chan.connection.close()


def test_the_http_api_reports_the_quorum_type(broker, ch, cleanup, uid):
    if RABBITMQ or not broker.http_port:
        pytest.skip("reads a private Warren's HTTP API")
    q = quorum(ch, cleanup, f"qq-http-{uid}")
    req = urllib.request.Request(f"{broker.http_url}/api/queues/%2F/{q}")
    req.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
    with urllib.request.urlopen(req, timeout=5) as r:
        info = json.load(r)
    assert info["type"] == "quorum" and info["durable"] is True
    # RabbitMQ's quorum fields: one node's alone, or a cluster's members (warren/cluster/replicas.py)
    assert info["leader"] == info["node"] and info["leader"] in info["members"]
    assert sorted(info["online"]) == sorted(info["members"])
