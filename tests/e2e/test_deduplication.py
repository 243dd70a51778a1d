"""Message deduplication with LavinMQ's arguments, on exchanges and queues (pika).

``x-message-deduplication: true`` plus ``x-cache-size``, ``x-cache-ttl`` (ms) and
``x-deduplication-header`` (default ``x-deduplication-header``). RabbitMQ 3.10 has no such
feature (the rabbitmq-message-deduplication plugin is third party and not installed here): it
accepts the arguments and ignores them, so these tests are skipped against it.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from .helpers import PRECONDITION_FAILED, RABBITMQ, make_exchange, make_queue, message_count, new_queue

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(RABBITMQ, reason="deduplication is a LavinMQ feature; RabbitMQ 3.10 has no plugin for it here"),
]

HEADER = "x-deduplication-header"


@pytest.fixture
def cch(conn):
    c = conn.channel()
    c.confirm_delivery()
    return c


def dedup_exchange(ch, cleanup, uid, tag="x", kind="fanout", **args) -> str:
    return make_exchange(ch, cleanup, f"dd-{tag}-{uid}", kind,
                         arguments={"x-message-deduplication": True, **args})


def bound(ch, exchange, key="") -> str:
    q = new_queue(ch)
    ch.queue_bind(q, exchange, key)
    return q


def send(ch, exchange, key, *values, header=HEADER, **extra):
    for v in values:
        h = {header: v, **extra} if v is not None else dict(extra)
        ch.basic_publish(exchange, key, b"m", pika.BasicProperties(headers=h))



# --------------------------------------------------------------------------- exchanges


def test_exchange_drops_a_message_whose_key_it_has_seen(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid)
    q = bound(cch, x)
    send(cch, x, "", "a", "a", "b", "a", "b", "c")
    assert message_count(conn, q) == 3


def test_messages_without_the_header_are_never_duplicates(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid)
    q = bound(cch, x)
    send(cch, x, "", None, None, None)
    assert message_count(conn, q) == 3


def test_keys_compare_by_type_and_value(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid)
    q = bound(cch, x)
    send(cch, x, "", 1, "1", 1, "1", 2)
    assert message_count(conn, q) == 3


def test_custom_deduplication_header(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid, **{"x-deduplication-header": "order-id"})
    q = bound(cch, x)
    send(cch, x, "", "o-1", "o-1", header="order-id")
    send(cch, x, "", "o-1", "o-1")  # the default header means nothing here
    assert message_count(conn, q) == 3


def test_cache_size_forgets_the_least_recently_seen_key(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid, **{"x-cache-size": 2})
    q = bound(cch, x)
    send(cch, x, "", "a", "b", "a", "c")  # a seen again, so c evicts b
    assert message_count(conn, q) == 3
    send(cch, x, "", "a")  # still remembered
    assert message_count(conn, q) == 3
    send(cch, x, "", "b")  # forgotten: routed (and evicts c, the least recent)
    assert message_count(conn, q) == 4


def test_cache_ttl_forgets_keys_after_it(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid, **{"x-cache-ttl": 300})
    q = bound(cch, x)
    send(cch, x, "", "a", "a")
    assert message_count(conn, q) == 1
    time.sleep(0.45)
    send(cch, x, "", "a", "a")
    assert message_count(conn, q) == 2


def test_message_x_cache_ttl_header_overrides_the_exchange_ttl(conn, cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid)  # no TTL: remembered for ever, unless the message says
    q = bound(cch, x)
    send(cch, x, "", "short", **{"x-cache-ttl": 200})
    send(cch, x, "", "long")
    time.sleep(0.35)
    send(cch, x, "", "short", "long")
    assert message_count(conn, q) == 3


def test_mandatory_duplicate_is_returned(cch, cleanup, uid):
    x = dedup_exchange(cch, cleanup, uid)
    bound(cch, x)
    cch.basic_publish(x, "", b"m", pika.BasicProperties(headers={HEADER: "k"}), mandatory=True)
    with pytest.raises(UnroutableError):
        cch.basic_publish(x, "", b"m", pika.BasicProperties(headers={HEADER: "k"}), mandatory=True)


def test_duplicate_does_not_go_to_the_alternate_exchange(conn, cch, cleanup, uid):
    alt = make_exchange(cch, cleanup, f"dd-alt-{uid}", "fanout")
    x = dedup_exchange(cch, cleanup, uid, kind="direct", **{"alternate-exchange": alt})
    q_alt = bound(cch, alt)
    send(cch, x, "unbound", "k", "k")
    assert message_count(conn, q_alt) == 1


def test_deduplicating_exchange_reached_over_an_e2e_binding(conn, cch, cleanup, uid):
    src = make_exchange(cch, cleanup, f"dd-src-{uid}", "fanout")
    x = dedup_exchange(cch, cleanup, uid)
    cch.exchange_bind(x, src)
    q_dedup, q_src = bound(cch, x), bound(cch, src)
    send(cch, src, "", "a", "a")
    assert (message_count(conn, q_dedup), message_count(conn, q_src)) == (1, 2)


def test_every_exchange_keeps_its_own_cache(conn, cch, cleanup, uid):
    x1 = dedup_exchange(cch, cleanup, uid, "one")
    x2 = dedup_exchange(cch, cleanup, uid, "two")
    q1, q2 = bound(cch, x1), bound(cch, x2)
    send(cch, x1, "", "a")
    send(cch, x2, "", "a")
    assert (message_count(conn, q1), message_count(conn, q2)) == (1, 1)


def test_deduplication_off_when_the_argument_is_false(conn, cch, cleanup, uid):
    x = make_exchange(cch, cleanup, f"dd-off-{uid}", "fanout", arguments={"x-message-deduplication": False})
    q = bound(cch, x)
    send(cch, x, "", "a", "a")
    assert message_count(conn, q) == 2


def test_delayed_message_is_not_taken_for_its_own_duplicate(conn, cch, cleanup, uid):
    x = make_exchange(cch, cleanup, f"dd-delayed-{uid}", "x-delayed-message", arguments={
        "x-delayed-type": "fanout", "x-message-deduplication": True})
    q = bound(cch, x)
    for _ in range(3):
        cch.basic_publish(x, "", b"m", pika.BasicProperties(headers={HEADER: "k", "x-delay": 200}))
    time.sleep(0.6)
    assert message_count(conn, q) == 1


@pytest.mark.parametrize("args", [
    {"x-message-deduplication": "yes"},
    {"x-message-deduplication": True, "x-cache-size": 0},
    {"x-message-deduplication": True, "x-cache-size": "10"},
    {"x-message-deduplication": True, "x-cache-ttl": -1},
    {"x-message-deduplication": True, "x-deduplication-header": 5},
])
@pytest.mark.parametrize("kind", ["exchange", "queue"])
def test_invalid_deduplication_arguments_are_406(conn, uid, args, kind):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        if kind == "exchange":
            ch.exchange_declare(f"dd-bad-{uid}", "fanout", arguments=args)
        else:
            ch.queue_declare(f"dd-bad-{uid}", arguments=args)
    assert ei.value.reply_code == PRECONDITION_FAILED


# --------------------------------------------------------------------------- queues


def dedup_queue(ch, cleanup, uid, tag="q", **args) -> str:
    return make_queue(ch, cleanup, f"dd-{tag}-{uid}", arguments={"x-message-deduplication": True, **args})


def test_queue_drops_duplicates(conn, cch, cleanup, uid):
    q = dedup_queue(cch, cleanup, uid)
    send(cch, "", q, "a", "a", "b", None, None)  # confirms still come for the dropped ones
    assert message_count(conn, q) == 4


def test_queue_deduplicates_independently_of_other_queues(conn, cch, cleanup, uid):
    x = make_exchange(cch, cleanup, f"dd-fan-{uid}", "fanout")
    q = dedup_queue(cch, cleanup, uid)
    cch.queue_bind(q, x)
    plain = bound(cch, x)
    send(cch, x, "", "a", "a", "a")
    assert (message_count(conn, q), message_count(conn, plain)) == (1, 3)


def test_queue_cache_ttl_size_and_header(conn, cch, cleanup, uid):
    q = dedup_queue(cch, cleanup, uid, **{"x-cache-ttl": 250, "x-cache-size": 10, "x-deduplication-header": "id"})
    send(cch, "", q, "1", "1", header="id")
    assert message_count(conn, q) == 1
    time.sleep(0.4)
    send(cch, "", q, "1", header="id")
    assert message_count(conn, q) == 2


def test_a_consumed_message_is_still_remembered(conn, cch, cleanup, uid):
    q = dedup_queue(cch, cleanup, uid)
    send(cch, "", q, "a")
    assert cch.basic_get(q, auto_ack=True)[2] == b"m"
    send(cch, "", q, "a")
    assert message_count(conn, q) == 0


def test_durable_queue_remembers_the_keys_it_holds_after_kill_9(start_broker, uid):
    """A crash must not empty the cache of a durable queue while its messages stay: a publisher
    that repeats a publish whose confirm the crash swallowed (warren's Spark writer after a
    broker kill -9) would queue it twice. Past x-cache-size paged messages count too."""
    import signal

    from tests.conftest import skip_under_workers
    skip_under_workers("restarts its own broker on the same data folder")
    node = start_broker()
    data = node.data_dir
    q = f"dd-crash-{uid}"
    count = 3000  # above the 2048 a restarted queue keeps in memory: the rest stay paged

    def publish(url, keys):
        c = pika.BlockingConnection(pika.URLParameters(url))
        ch = c.channel()
        ch.confirm_delivery()
        ch.queue_declare(q, durable=True, arguments={"x-message-deduplication": True, "x-cache-size": count})
        for k in keys:
            ch.basic_publish("", q, b"m", pika.BasicProperties(delivery_mode=2, headers={HEADER: k}))
        n = ch.queue_declare(q, passive=True).method.message_count
        c.close()
        return n

    assert publish(node.url, [f"k{i}" for i in range(count)]) == count
    node.signal(signal.SIGKILL)
    node.wait()
    again = start_broker(data_dir=data)
    # every key again (the oldest first, then the newest), and one new key
    assert publish(again.url, ["k0", f"k{count - 1}", "k1500", "new"]) == count + 1
