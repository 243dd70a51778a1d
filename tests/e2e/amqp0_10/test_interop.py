"""One broker for both protocol families: 0-10 transfers consumed by pika (0-9-1) and pika's
publishes consumed over 0-10, with every property mapped both ways (docs/versions.md)."""

from __future__ import annotations

import datetime
import uuid

import pika

from warren.codec.amqp0_10 import types as t
from warren.protocol.amqp0_10.properties import CLUSTER_ID_HEADER, MESSAGE_ID_HEADER, TYPE_HEADER
from warren.spec import amqp0_10 as spec

from ..helpers import get


def test_0_10_transfer_is_consumed_by_pika_with_its_properties(session, ch, qname, cleanup):
    cleanup["queues"].append(qname)
    ch.queue_declare(qname)
    mid = uuid.uuid4()
    stamp = 1_700_000_000
    session.transfer("", b"from 0-10", routing_key=qname,
                     delivery=spec.MessageDeliveryProperties(delivery_mode=2, priority=7, ttl=60000,
                                                             timestamp=stamp),
                     properties=spec.MessageMessageProperties(
                         message_id=mid, correlation_id=b"corr-1", content_type="text/plain",
                         content_encoding="utf-8", user_id=b"guest", app_id=b"tests",
                         reply_to=spec.MessageReplyTo(exchange="", routing_key="replies"),
                         application_headers={"qpid.subject": "news", "n": t.Int32(5), "big": 1 << 40,
                                              "flag": True, "name": "x", "nested": {"a": t.UInt8(1)}}))
    method, props, body = get(ch, qname)
    assert body == b"from 0-10"
    assert method.routing_key == qname and method.exchange == ""
    assert props.delivery_mode == 2 and props.priority == 7 and props.expiration == "60000"
    assert props.timestamp == stamp
    assert props.message_id == str(mid) and props.correlation_id == "corr-1"
    assert (props.content_type, props.content_encoding) == ("text/plain", "utf-8")
    assert (props.user_id, props.app_id, props.reply_to) == ("guest", "tests", "replies")
    assert props.headers == {"qpid.subject": "news", "n": 5, "big": 1 << 40, "flag": True, "name": "x",
                             "nested": {"a": 1}}
    ch.basic_ack(method.delivery_tag)


def test_pika_publish_is_consumed_over_0_10_with_its_properties(session, ch, qname, cleanup):
    cleanup["queues"].append(qname)
    ch.queue_declare(qname)
    mid = str(uuid.uuid4())
    ch.basic_publish("", qname, b"from 0-9-1", pika.BasicProperties(
        content_type="application/json", content_encoding="gzip", delivery_mode=2, priority=3,
        correlation_id="c-9", reply_to="amq.topic/answers", expiration="5000", message_id=mid,
        timestamp=1_600_000_000, type="order", user_id="guest", app_id="pika-app", cluster_id="c1",
        headers={"qpid.subject": "s", "count": 12, "when": datetime.datetime(2020, 1, 2, 3, 4, 5),
                 "list": [1, "two"], "raw": b"\x00\x01"}))
    session.subscribe(qname, "d")
    msg = session.get("d")
    assert msg.body == b"from 0-9-1"
    d, p = msg.delivery, msg.properties
    assert (d.routing_key, d.exchange, d.delivery_mode, d.priority, d.ttl, d.timestamp, d.redelivered) == (
        qname, "", 2, 3, 5000, 1_600_000_000, False)
    assert p.message_id == uuid.UUID(mid) and p.correlation_id == b"c-9"
    assert (p.content_type, p.content_encoding, p.user_id, p.app_id) == ("application/json", "gzip", b"guest",
                                                                        b"pika-app")
    assert (p.reply_to.exchange, p.reply_to.routing_key) == ("amq.topic", "answers")
    h = p.application_headers
    assert h["qpid.subject"] == "s" and h["count"] == 12 and h["raw"] == b"\x00\x01"
    assert h["list"] == [1, "two"] and int(h["when"]) == int(datetime.datetime(
        2020, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc).timestamp())
    assert h[TYPE_HEADER] == "order" and h[CLUSTER_ID_HEADER] == "c1"
    session.accept(msg.id)


def test_properties_survive_0_9_1_to_0_10_and_back(session, ch, qname, cleanup):
    """pika -> 0-10 consumer -> 0-10 transfer -> pika: what 0-10 has no field for comes back."""
    back = qname + "-back"
    cleanup["queues"] += [qname, back]
    ch.queue_declare(qname)
    ch.queue_declare(back)
    ch.basic_publish("", qname, b"round", pika.BasicProperties(message_id="not-a-uuid", type="t1", cluster_id="c",
                                                              reply_to="plain-queue", headers={"k": "v"}))
    session.subscribe(qname, "d")
    msg = session.get("d")
    assert msg.properties.message_id is None
    assert msg.properties.application_headers[MESSAGE_ID_HEADER] == "not-a-uuid"
    assert msg.properties.reply_to.exchange == "" and msg.properties.reply_to.routing_key == "plain-queue"
    session.transfer("", msg.body, routing_key=back, properties=msg.properties)
    session.accept(msg.id)
    _, props, body = get(ch, back, auto_ack=True)
    assert body == b"round"
    assert (props.message_id, props.type, props.cluster_id, props.reply_to) == ("not-a-uuid", "t1", "c",
                                                                                "plain-queue")
    assert props.headers == {"k": "v"}


def test_topic_exchange_routes_0_10_to_pika_and_pika_to_0_10(session, ch, qname, cleanup):
    cleanup["queues"].append(qname)
    ch.queue_declare(qname)
    ch.queue_bind(qname, "amq.topic", "news.#")
    session.transfer("amq.topic", b"by 0-10", routing_key="news.eu")
    _, _, body = get(ch, qname, auto_ack=True)
    assert body == b"by 0-10"
    mine = qname + "-010"
    session.send(spec.QueueDeclare(queue=mine, exclusive=True, auto_delete=True))
    session.send(spec.ExchangeBind(queue=mine, exchange="amq.topic", binding_key="weather.*"))
    ch.basic_publish("amq.topic", "weather.today", b"by pika")
    session.subscribe(mine, "w", accept_mode=1)
    msg = session.get("w")
    assert msg.body == b"by pika" and msg.delivery.exchange == "amq.topic"
    assert msg.delivery.routing_key == "weather.today"


def test_large_messages_cross_both_ways_in_many_frames(session, ch, qname, cleanup):
    cleanup["queues"].append(qname)
    ch.queue_declare(qname, arguments={"x-queue-type": "quorum"}, durable=True)
    big = bytes(range(256)) * 1200  # 307,200 octets: five 0-10 frames, three 0-9-1 frames
    session.transfer("", big, routing_key=qname, delivery=spec.MessageDeliveryProperties(delivery_mode=2))
    _, props, body = get(ch, qname, auto_ack=True)
    assert body == big and props.delivery_mode == 2
    ch.basic_publish("", qname, big[::-1])
    session.subscribe(qname, "big")
    msg = session.get("big")
    assert msg.body == big[::-1]
    session.accept(msg.id)
