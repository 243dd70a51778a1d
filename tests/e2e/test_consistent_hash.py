"""The consistent-hash exchange, type ``x-consistent-hash`` (pika).

Differential reference: RabbitMQ 3.10 with ``rabbitmq_consistent_hash_exchange`` enabled
(the tests skip there if the plugin is not). The two brokers hash differently, so the tests
check properties, not placements: one copy per message, the same key to the same queue,
shares proportional to the weights, and keys moving only to a newly bound queue.
"""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, UnroutableError

from .helpers import (
    PRECONDITION_FAILED, connect, make_exchange, message_count, new_queue, wait_until,
)

pytestmark = pytest.mark.timeout(90)

N = 3000


@pytest.fixture
def chx(conn, cleanup, uid):
    """A channel, and a check that the broker has the exchange type (else skip)."""
    ch = conn.channel()
    try:
        ch.exchange_declare(f"chx-probe-{uid}", "x-consistent-hash", auto_delete=True)
    except (ChannelClosedByBroker, ConnectionClosedByBroker) as e:
        pytest.skip(f"the broker has no x-consistent-hash exchange: {e}")
    cleanup["exchanges"].append(f"chx-probe-{uid}")
    return conn.channel()


def hashx(ch, cleanup, uid, tag="h", **kw) -> str:
    return make_exchange(ch, cleanup, f"chx-{tag}-{uid}", "x-consistent-hash", **kw)


def bound(ch, exchange: str, *weights: str) -> list[str]:
    out = []
    for w in weights:
        q = new_queue(ch)
        ch.queue_bind(q, exchange, w)
        out.append(q)
    return out


def counts(conn, qs, total: int) -> list[int]:
    assert wait_until(lambda: sum(message_count(conn, q) for q in qs) >= total, 15)
    return [message_count(conn, q) for q in qs]


def placement(ch, qs) -> dict[bytes, str]:
    """Body -> queue it reached, emptying the queues."""
    out = {}
    for q in qs:
        while True:
            method, _, body = ch.basic_get(q, auto_ack=True)
            if method is None:
                break
            out[body] = q
    return out


def test_each_message_goes_to_exactly_one_queue(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "1", "1", "1")
    for i in range(300):
        chx.basic_publish(x, f"key-{i}", b"m")
    assert sum(counts(conn, qs, 300)) == 300
    assert all(message_count(conn, q) > 0 for q in qs)


def test_shares_are_proportional_to_the_weights(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "1", "2", "3")
    for i in range(N):
        chx.basic_publish(x, f"order-{i}-{uid}", b"")
    got = counts(conn, qs, N)
    assert sum(got) == N
    for n, w in zip(got, (1, 2, 3)):
        assert abs(n / N - w / 6) < 0.05, got


def test_the_same_routing_key_always_reaches_the_same_queue(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "5", "5", "5", "5")
    for _ in range(20):
        chx.basic_publish(x, "customer-42", b"m")
    got = counts(conn, qs, 20)
    assert sorted(got) == [0, 0, 0, 20]


def test_a_new_binding_only_takes_keys_from_the_others(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "10", "10", "10")
    keys = [f"k{i}".encode() for i in range(600)]
    for k in keys:
        chx.basic_publish(x, k.decode(), k)
    counts(conn, qs, len(keys))
    before = placement(chx, qs)
    qs.append(bound(chx, x, "10")[0])
    for k in keys:
        chx.basic_publish(x, k.decode(), k)
    counts(conn, qs, len(keys))
    after = placement(chx, qs)
    moved = [k for k in keys if after[k] != before[k]]
    assert moved and all(after[k] == qs[-1] for k in moved)
    assert 0.1 < len(moved) / len(keys) < 0.4


def test_unbinding_the_last_binding_sends_its_keys_elsewhere(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "1", "1", "1")
    chx.queue_unbind(qs[2], x, "1")
    for i in range(200):
        chx.basic_publish(x, f"k{i}", b"m")
    got = counts(conn, qs[:2], 200)
    assert sum(got) == 200 and message_count(conn, qs[2]) == 0


def test_hash_header_routes_on_the_header_value(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid, arguments={"hash-header": "user"})
    qs = bound(chx, x, "1", "1", "1")
    for i in range(30):  # the routing key changes, the header does not
        chx.basic_publish(x, f"rk-{i}", b"m", pika.BasicProperties(headers={"user": "alice"}))
    assert sorted(counts(conn, qs, 30)) == [0, 0, 30]
    for i in range(300):
        chx.basic_publish(x, "same", b"m", pika.BasicProperties(headers={"user": f"u{i}"}))
    assert all(n > 0 for n in counts(conn, qs, 330))


def test_messages_without_the_hash_header_still_route_to_one_queue(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid, arguments={"hash-header": "user"})
    qs = bound(chx, x, "1", "1", "1")
    for i in range(20):
        chx.basic_publish(x, f"rk-{i}", b"m")
    assert sorted(counts(conn, qs, 20)) == [0, 0, 20]


@pytest.mark.parametrize("prop", ["message_id", "correlation_id", "timestamp"])
def test_hash_property_routes_on_the_property(conn, chx, cleanup, uid, prop):
    x = hashx(chx, cleanup, uid, arguments={"hash-property": prop})
    qs = bound(chx, x, "1", "1", "1")

    def props(i):
        value = 1_700_000_000 + i if prop == "timestamp" else f"id-{i}"
        return pika.BasicProperties(**{prop: value})

    for i in range(20):
        chx.basic_publish(x, f"rk-{i}", b"m", props(7))
    assert sorted(counts(conn, qs, 20)) == [0, 0, 20]
    for i in range(300):
        chx.basic_publish(x, "rk", b"m", props(i))
    assert all(n > 0 for n in counts(conn, qs, 320))


def test_only_the_first_routing_key_is_hashed(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    qs = bound(chx, x, "1", "1", "1", "1")
    for i in range(50):
        chx.basic_publish(x, f"k{i}", b"m", pika.BasicProperties(headers={"CC": ["c1", "c2", "c3"]}))
    assert sum(counts(conn, qs, 50)) == 50


def test_no_bindings_means_unroutable(chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    chx.confirm_delivery()
    with pytest.raises(UnroutableError):
        chx.basic_publish(x, "k", b"m", mandatory=True)


def test_consistent_hash_exchange_as_an_e2e_destination(conn, chx, cleanup, uid):
    x = hashx(chx, cleanup, uid)
    src = make_exchange(chx, cleanup, f"chx-src-{uid}", "fanout")
    chx.exchange_bind(x, src)
    qs = bound(chx, x, "1", "1")
    for i in range(100):
        chx.basic_publish(src, f"k{i}", b"m")
    assert sum(counts(conn, qs, 100)) == 100


@pytest.mark.parametrize("key,text", [
    ("abc", 'The binding key must be an integer: <<"abc">>'),
    ("", "The binding key must be an integer: <<>>"),
    ("0", "The binding key must be greater than 0"),
    ("-3", "The binding key must be greater than 0"),
])
def test_a_binding_key_that_is_not_a_positive_integer_is_406(conn, chx, cleanup, uid, key, text):
    x = hashx(chx, cleanup, uid)
    ch = conn.channel()
    q = new_queue(ch)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(q, x, key)
    assert (ei.value.reply_code, ei.value.reply_text) == (PRECONDITION_FAILED, "PRECONDITION_FAILED - " + text)


@pytest.mark.parametrize("args,text", [
    ({"hash-header": "a", "hash-property": "message_id"}, "hash-header and hash-property are mutually exclusive"),
    ({"hash-property": "type"}, "Unsupported property: type"),
])
def test_invalid_exchange_arguments_are_406(conn, chx, uid, args, text):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare(f"chx-bad-{uid}", "x-consistent-hash", arguments=args)
    assert (ei.value.reply_code, ei.value.reply_text) == (PRECONDITION_FAILED, "PRECONDITION_FAILED - " + text)


def test_durable_exchange_keeps_bindings_and_placement_across_a_restart(start_broker):
    b = start_broker()
    c = connect(b)
    ch = c.channel()
    ch.exchange_declare("chx-durable", "x-consistent-hash", durable=True)
    qs = [f"chx-dq-{i}" for i in range(3)]
    for q, w in zip(qs, ("1", "2", "3")):
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, "chx-durable", w)
    keys = [f"k{i}".encode() for i in range(200)]
    for k in keys:
        ch.basic_publish("chx-durable", k.decode(), k)
    counts(c, qs, len(keys))
    before = placement(ch, qs)
    c.close()
    b.stop()
    b2 = start_broker(data_dir=b.data_dir)
    c = connect(b2)
    ch = c.channel()
    for k in keys:
        ch.basic_publish("chx-durable", k.decode(), k)
    counts(c, qs, len(keys))
    assert placement(ch, qs) == before
    c.close()

