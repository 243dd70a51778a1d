"""End-to-end routing tests over TCP (pika; RabbitMQ is the reference).

The topic and headers tables below were checked case by case against RabbitMQ 3.10.

To know that every publish has been routed without sleeping, each check publishes its test
messages and then a sentinel straight to the queue through the default exchange: one channel's
publishes are routed in order, so once the sentinel is in the queue every earlier publish has
been routed too.
"""

from __future__ import annotations

import time

import pika
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from ..topic_cases import TOPIC_KEYS, TOPIC_TABLE
from .helpers import NO_ROUTE, PRECONDITION_FAILED, connect, new_exchange, new_queue

pytestmark = pytest.mark.timeout(60)

SENTINEL = b"--sentinel--"


def drain_until_sentinel(ch, queue: str, timeout: float = 10.0) -> list[bytes]:
    """Publish a sentinel to `queue` via the default exchange and return the bodies before it."""
    ch.basic_publish("", queue, SENTINEL)
    bodies: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.02)
            continue
        if body == SENTINEL:
            return bodies
        bodies.append(body)
    pytest.fail(f"sentinel not received within {timeout}s; got {bodies!r}")


def routed_keys(ch, exchange: str, queue: str, keys: list[str]) -> list[str]:
    for k in keys:
        ch.basic_publish(exchange, k, k.encode())
    return [b.decode() for b in drain_until_sentinel(ch, queue)]


# --------------------------------------------------------------------------- direct


def test_direct_exchange_routes_on_exact_routing_key_equality(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="orders.created")
    got = routed_keys(ch, ex, q, ["orders.created", "orders.*", "orders", "Orders.created",
                                   "orders.created.x", "", "orders.created"])
    assert got == ["orders.created", "orders.created"]


def test_direct_exchange_delivers_to_every_queue_bound_with_the_key(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    q1, q2, q3 = new_queue(ch), new_queue(ch), new_queue(ch)
    ch.queue_bind(q1, ex, routing_key="k")
    ch.queue_bind(q2, ex, routing_key="k")
    ch.queue_bind(q3, ex, routing_key="other")
    ch.basic_publish(ex, "k", b"m")
    assert drain_until_sentinel(ch, q1) == [b"m"]
    assert drain_until_sentinel(ch, q2) == [b"m"]
    assert drain_until_sentinel(ch, q3) == []


def test_direct_exchange_with_one_queue_bound_under_two_keys_delivers_each_match_once(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="a")
    ch.queue_bind(q, ex, routing_key="b")
    assert routed_keys(ch, ex, q, ["a", "b", "c"]) == ["a", "b"]


def test_direct_exchange_empty_routing_key_binding_matches_only_the_empty_key(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="")
    assert routed_keys(ch, ex, q, ["", "x", " "]) == [""]


# --------------------------------------------------------------------------- fanout


def test_fanout_exchange_ignores_routing_keys_and_delivers_to_every_bound_queue(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "fanout", uid)
    qs = [new_queue(ch) for _ in range(3)]
    ch.queue_bind(qs[0], ex, routing_key="whatever")
    ch.queue_bind(qs[1], ex, routing_key="")
    ch.queue_bind(qs[2], ex, routing_key="#")
    for k in ["a", "", "b.c"]:
        ch.basic_publish(ex, k, k.encode())
    for q in qs:
        assert drain_until_sentinel(ch, q) == [b"a", b"", b"b.c"]


def test_fanout_exchange_delivers_once_to_a_queue_bound_twice(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "fanout", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="one")
    ch.queue_bind(q, ex, routing_key="two")
    assert routed_keys(ch, ex, q, ["x"]) == ["x"]


# --------------------------------------------------------------------------- topic

# TOPIC_TABLE (tests/topic_cases.py): pattern -> the keys of TOPIC_KEYS it matches, exactly as
# RabbitMQ 3.10 routes them.


@pytest.mark.parametrize("pattern", list(TOPIC_TABLE), ids=lambda p: repr(p))
def test_topic_pattern_matches_exactly_the_keys_rabbitmq_matches(ch, cleanup, uid, pattern):
    ex = new_exchange(ch, cleanup, "topic", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key=pattern)
    got = routed_keys(ch, ex, q, TOPIC_KEYS)
    assert got == TOPIC_TABLE[pattern], f"pattern {pattern!r}"


def test_topic_exchange_delivers_once_when_several_bindings_of_a_queue_match(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "topic", uid)
    q = new_queue(ch)
    for p in ("#", "a.*", "a.b", "*.b"):
        ch.queue_bind(q, ex, routing_key=p)
    assert routed_keys(ch, ex, q, ["a.b", "c"]) == ["a.b", "c"]


def test_topic_exchange_routes_to_each_matching_queue(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "topic", uid)
    q_all, q_stock, q_nyse = new_queue(ch), new_queue(ch), new_queue(ch)
    ch.queue_bind(q_all, ex, routing_key="#")
    ch.queue_bind(q_stock, ex, routing_key="stock.#")
    ch.queue_bind(q_nyse, ex, routing_key="stock.nyse.*")
    for k in ("stock.nyse.ibm", "stock.nasdaq.msft", "bond.us"):
        ch.basic_publish(ex, k, k.encode())
    assert drain_until_sentinel(ch, q_all) == [b"stock.nyse.ibm", b"stock.nasdaq.msft", b"bond.us"]
    assert drain_until_sentinel(ch, q_stock) == [b"stock.nyse.ibm", b"stock.nasdaq.msft"]
    assert drain_until_sentinel(ch, q_nyse) == [b"stock.nyse.ibm"]


def test_topic_unbind_removes_only_that_pattern(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "topic", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="a.*")
    ch.queue_bind(q, ex, routing_key="*.b")
    ch.queue_unbind(q, ex, routing_key="a.*")
    assert routed_keys(ch, ex, q, ["a.b", "a.c", "c.b"]) == ["a.b", "c.b"]


def topic_words(s: str) -> list[str]:
    """RabbitMQ's word split: "" has no words, otherwise split on "." keeping empty words."""
    return [] if s == "" else s.split(".")


def reference_topic_match(pattern: str, key: str) -> bool:
    """A reference model of RabbitMQ topic matching ("*" = one word, "#" = zero or more)."""
    p, k = topic_words(pattern), topic_words(key)

    def match(i: int, j: int) -> bool:
        if i == len(p):
            return j == len(k)
        if p[i] == "#":
            return any(match(i + 1, jj) for jj in range(j, len(k) + 1))
        if j == len(k):
            return False
        return (p[i] == "*" or p[i] == k[j]) and match(i + 1, j + 1)

    return match(0, 0)


def test_the_reference_topic_model_agrees_with_the_rabbitmq_table():
    for pattern, matching in TOPIC_TABLE.items():
        assert [k for k in TOPIC_KEYS if reference_topic_match(pattern, k)] == matching, pattern


_pattern_word = st.sampled_from(["a", "b", "", "*", "#"])
_key_word = st.sampled_from(["a", "b", ""])
_patterns = st.lists(_pattern_word, max_size=5).map(".".join)
_keys = st.lists(st.lists(_key_word, max_size=5).map(".".join), min_size=1, max_size=12, unique=True)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=_patterns, keys=_keys)
def test_topic_routing_agrees_with_the_reference_model_for_generated_patterns(broker, uid, pattern, keys):
    c = connect(broker)
    try:
        ch = c.channel()
        ex = f"rt-topic-hyp-{uid}"
        ch.exchange_declare(ex, exchange_type="topic", auto_delete=True)
        q = new_queue(ch)
        ch.queue_bind(q, ex, routing_key=pattern)
        got = routed_keys(ch, ex, q, keys)
        assert got == [k for k in keys if reference_topic_match(pattern, k)], f"pattern {pattern!r}"
        ch.queue_delete(q)  # last binding gone: the auto-delete exchange goes too
    finally:
        c.close()


# --------------------------------------------------------------------------- headers

# (binding arguments, message headers, routed?) -- each checked against RabbitMQ 3.10.
HEADERS_TABLE = [
    ("all: every binding header matches", {"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x"}, True),
    ("all: one binding header missing", {"x-match": "all", "a": 1, "b": "x"}, {"a": 1}, False),
    ("all: extra message headers are fine", {"x-match": "all", "a": 1, "b": "x"},
     {"a": 1, "b": "x", "c": 3}, True),
    ("all: value differs", {"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "y"}, False),
    ("default x-match is all (match)", {"a": 1}, {"a": 1, "b": 2}, True),
    ("default x-match is all (no match)", {"a": 1, "b": 2}, {"a": 1}, False),
    ("any: one header matches", {"x-match": "any", "a": 1, "b": "x"}, {"a": 1}, True),
    ("any: no header matches", {"x-match": "any", "a": 1, "b": "x"}, {"a": 2}, False),
    ("any: message without headers", {"x-match": "any", "a": 1, "b": "x"}, None, False),
    ("all with no binding headers matches everything", {"x-match": "all"}, None, True),
    ("all with no binding headers matches any headers", {"x-match": "all"}, {"z": 1}, True),
    ("any with no binding headers matches nothing", {"x-match": "any"}, {"z": 1}, False),
    ("types must match: int vs string", {"x-match": "all", "a": 1}, {"a": "1"}, False),
    ("types must match: int vs bool", {"x-match": "all", "a": 1}, {"a": True}, False),
    ("void binding value means presence (present)", {"x-match": "all", "a": None}, {"a": "anything"}, True),
    ("void binding value means presence (absent)", {"x-match": "all", "a": None}, {"b": "anything"}, False),
    ("void message value does not match a string", {"x-match": "all", "a": "x"}, {"a": None}, False),
    ("nested tables compare by value", {"x-match": "all", "a": {"n": 1}}, {"a": {"n": 1}}, True),
    ("arrays compare by value", {"x-match": "all", "a": [1, 2]}, {"a": [1, 2]}, True),
    ("long string and byte array are the same type class in RabbitMQ", {"x-match": "all", "a": "1"},
     {"a": b"1"}, True),
    ("all ignores x- binding headers (value differs)", {"x-match": "all", "x-foo": "bar"}, {"x-foo": "baz"}, True),
    ("all ignores x- binding headers (absent)", {"x-match": "all", "x-foo": "bar", "a": 1}, {"a": 1}, True),
    ("any ignores x- binding headers", {"x-match": "any", "x-foo": "bar", "a": 1}, {"x-foo": "bar"}, False),
]

HEADERS_WITH_X_TABLE = [
    ("all-with-x: x- header must match too", {"x-match": "all-with-x", "x-foo": "bar", "a": 1},
     {"a": 1, "x-foo": "bar"}, True),
    ("all-with-x: x- header missing", {"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, False),
    ("all-with-x: x- header differs", {"x-match": "all-with-x", "x-foo": "bar", "a": 1},
     {"a": 1, "x-foo": "baz"}, False),
    ("all-with-x with no binding headers matches everything", {"x-match": "all-with-x"}, {"q": 1}, True),
    ("any-with-x: x- header alone matches", {"x-match": "any-with-x", "x-foo": "bar", "a": 1},
     {"x-foo": "bar"}, True),
    ("any-with-x: x- header differs and nothing else", {"x-match": "any-with-x", "x-foo": "bar", "a": 1},
     {"x-foo": "baz"}, False),
    ("any-with-x: plain header matches", {"x-match": "any-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, True),
]


def headers_routed(ch, ex: str, bind_args: dict, headers: dict | None) -> bool:
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="ignored", arguments=bind_args)
    ch.basic_publish(ex, "anything", b"m", pika.BasicProperties(headers=headers))
    got = drain_until_sentinel(ch, q)
    assert got in ([], [b"m"])
    return got == [b"m"]


@pytest.mark.parametrize("case,bind_args,headers,expected", HEADERS_TABLE, ids=[c[0] for c in HEADERS_TABLE])
def test_headers_exchange_matches_as_rabbitmq_does(ch, cleanup, uid, case, bind_args, headers, expected):
    ex = new_exchange(ch, cleanup, "headers", uid)
    assert headers_routed(ch, ex, bind_args, headers) is expected, case


@pytest.mark.parametrize("case,bind_args,headers,expected", HEADERS_WITH_X_TABLE,
                         ids=[c[0] for c in HEADERS_WITH_X_TABLE])
def test_headers_exchange_with_x_match_modes_match_x_headers_too(conn, ch, cleanup, uid, case, bind_args,
                                                                 headers, expected):
    ex = new_exchange(ch, cleanup, "headers", uid)
    # all-with-x / any-with-x arrived in RabbitMQ 3.10; older brokers reject them with 406.
    probe = conn.channel()
    try:
        probe.queue_bind(probe.queue_declare("", exclusive=True).method.queue, ex,
                         arguments={"x-match": bind_args["x-match"]})
    except ChannelClosedByBroker as e:
        if e.reply_code == PRECONDITION_FAILED:
            pytest.skip(f"broker does not support x-match={bind_args['x-match']} (RabbitMQ < 3.10)")
        raise
    assert headers_routed(ch, ex, bind_args, headers) is expected, case


def test_headers_binding_with_an_invalid_x_match_fails_with_406(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "headers", uid)
    q = new_queue(ch)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(q, ex, arguments={"x-match": "bogus", "a": 1})
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_headers_exchange_ignores_the_routing_key(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "headers", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="k1", arguments={"x-match": "all", "h": "v"})
    props = pika.BasicProperties(headers={"h": "v"})
    ch.basic_publish(ex, "k1", b"1", props)
    ch.basic_publish(ex, "k2", b"2", props)
    assert drain_until_sentinel(ch, q) == [b"1", b"2"]


def test_amq_match_and_amq_headers_are_headers_exchanges(ch):
    for ex in ("amq.match", "amq.headers"):
        q = new_queue(ch)
        ch.queue_bind(q, ex, arguments={"x-match": "any", "sel": f"{ex}-{q}"})
        ch.basic_publish(ex, "", b"hit", pika.BasicProperties(headers={"sel": f"{ex}-{q}"}))
        ch.basic_publish(ex, "", b"miss", pika.BasicProperties(headers={"sel": "other"}))
        assert drain_until_sentinel(ch, q) == [b"hit"]
        ch.queue_unbind(q, ex, arguments={"x-match": "any", "sel": f"{ex}-{q}"})


# --------------------------------------------------------------------------- mandatory


def test_mandatory_unroutable_publish_is_returned_with_312_no_route(conn, ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    returned: list[tuple] = []
    ch.add_on_return_callback(lambda _ch, method, props, body: returned.append((method, props, body)))
    ch.basic_publish(ex, "nobody-home", b"bounce", pika.BasicProperties(message_id="m-1"), mandatory=True)
    deadline = time.monotonic() + 10
    while not returned and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    assert returned, "no basic.return received"
    method, props, body = returned[0]
    assert method.reply_code == NO_ROUTE
    assert method.reply_text == "NO_ROUTE"
    assert method.exchange == ex
    assert method.routing_key == "nobody-home"
    assert body == b"bounce"
    assert props.message_id == "m-1"
    assert ch.is_open


def test_mandatory_publish_to_the_default_exchange_without_a_queue_is_returned(conn, ch, uid):
    returned: list = []
    ch.add_on_return_callback(lambda _ch, method, props, body: returned.append(method))
    ch.basic_publish("", f"no-queue-{uid}", b"x", mandatory=True)
    deadline = time.monotonic() + 10
    while not returned and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.1)
    assert [m.reply_code for m in returned] == [NO_ROUTE]


def test_mandatory_routable_publish_is_not_returned(conn, ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="k")
    returned: list = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    ch.basic_publish(ex, "k", b"ok", mandatory=True)
    assert drain_until_sentinel(ch, q) == [b"ok"]
    conn.process_data_events(time_limit=0.2)
    assert returned == []


def test_non_mandatory_unroutable_publish_is_silently_dropped(conn, ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    returned: list = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    ch.basic_publish(ex, "nobody", b"dropped")
    conn.process_data_events(time_limit=0.3)
    assert returned == []
    assert ch.is_open


def test_mandatory_unroutable_publish_on_a_confirm_channel_raises_unroutable_error(ch, cleanup, uid):
    ex = new_exchange(ch, cleanup, "direct", uid)
    ch.confirm_delivery()
    with pytest.raises(UnroutableError) as ei:
        ch.basic_publish(ex, "nobody-home", b"bounce", mandatory=True)
    [msg] = ei.value.messages
    assert msg.method.reply_code == NO_ROUTE
    assert msg.body == b"bounce"
    # A routable publish on the same channel is confirmed normally.
    q = new_queue(ch)
    ch.queue_bind(q, ex, routing_key="k")
    ch.basic_publish(ex, "k", b"fine", mandatory=True)
