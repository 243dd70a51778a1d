"""Last-value queues (Qpid's ``qpid.last_value_queue_key``) declared and used through pika.

Warren's own feature (RabbitMQ has none by these arguments): skipped against another broker.
"""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import PRECONDITION_FAILED, RABBITMQ, connect, make_queue, message_count, round_trip

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(RABBITMQ, reason="Qpid's queue arguments are Warren's (RabbitMQ ignores them)")]

KEY = {"qpid.last_value_queue_key": "ticker"}


def publish(ch, queue: str, key, body: str, persistent: bool = False) -> None:
    headers = None if key is None else {"ticker": key}
    ch.basic_publish("", queue, body.encode(),
                     pika.BasicProperties(headers=headers, delivery_mode=2 if persistent else None))


def drain(ch, queue: str, ack: bool = True) -> list[str]:
    out = []
    while True:
        method, _, body = ch.basic_get(queue, auto_ack=ack)
        if method is None:
            return out
        out.append(body.decode())


def test_each_key_keeps_its_last_value_at_the_tail(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"lvq-{uid}", arguments=KEY)
    for key, body in [("RHT", "RHT 1"), ("IBM", "IBM 1"), ("RHT", "RHT 2"), ("JAVA", "JAVA 1"), ("RHT", "RHT 3")]:
        publish(ch, q, key, body)
    assert drain(ch, q) == ["IBM 1", "JAVA 1", "RHT 3"]


def test_a_delivered_unacked_value_is_not_replaced_and_an_older_one_coming_back_is_dropped(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"lvq-unacked-{uid}", arguments=KEY)
    publish(ch, q, "a", "a-1")
    consumer = conn.channel()
    consumer.basic_qos(prefetch_count=1)
    method, _, body = next(consumer.consume(q, inactivity_timeout=5))
    assert body == b"a-1"
    consumer.cancel()
    publish(ch, q, "a", "a-2")
    assert message_count(conn, q) == 1
    consumer.basic_nack(method.delivery_tag, requeue=True)  # a-1 comes back: a-2 is newer
    round_trip(conn)
    assert drain(ch, q) == ["a-2"]


def test_a_ring_limit_keeps_one_value_per_key(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"lvq-ring-{uid}",
                   arguments={**KEY, "qpid.policy_type": "ring", "qpid.max_count": 3})
    for i in range(20):
        publish(ch, q, "abcd"[i % 4], f"{'abcd'[i % 4]}-{i}")
    assert drain(ch, q) == ["b-17", "c-18", "d-19"]


def test_a_bad_key_argument_closes_the_channel_with_406_and_nothing_else(conn, uid):
    bad = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        bad.queue_declare(f"lvq-bad-{uid}", arguments={"qpid.last_value_queue_key": "",
                                                       "qpid.group_header_key": "g"})
    assert e.value.reply_code == PRECONDITION_FAILED and "qpid.last_value_queue_key" in e.value.reply_text
    ok = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        ok.queue_declare(f"lvq-bad-{uid}", passive=True)
    assert e.value.reply_code == 404  # not created
    round_trip(conn)


def test_persistent_values_of_a_durable_last_value_queue_survive_kill_9(start_broker, tmp_path, uid):
    data = tmp_path / "lvq-data"
    b = start_broker(data_dir=data)
    q = f"lvq-durable-{uid}"
    c = connect(b)
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare(q, durable=True, arguments=KEY)
    for key, body in [("a", "a-1"), ("b", "b-1"), ("a", "a-2"), ("c", "c-1"), ("b", "b-2")]:
        publish(ch, q, key, body, persistent=True)
    publish(ch, q, "t", "transient")
    b.proc.kill()
    b.proc.wait()
    b = start_broker(data_dir=data)
    c = connect(b)
    ch = c.channel()
    ok = ch.queue_declare(q, durable=True, arguments=KEY)
    assert ok.method.message_count == 3
    publish(ch, q, "a", "a-3")  # still a last-value queue, indexed again
    assert drain(ch, q) == ["c-1", "b-2", "a-3"]
    c.close()
