"""The local random exchange, type ``x-local-random`` (RabbitMQ 4.0's), over pika and the HTTP API.

One queue per message, picked at random among the bound queues of the publisher's node (on one
node: every bound queue); the routing key plays no part; none bound: unroutable. Bindings take
the empty key and classic queues only (406 otherwise). RabbitMQ 3.10 has no such type: against
it the tests skip.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker, UnroutableError

from tests.conftest import CLUSTER_MODE
from tests.management.api_client import call

from .helpers import PRECONDITION_FAILED, make_exchange, make_queue, message_count, new_queue, wait_until

pytestmark = pytest.mark.timeout(90)

N = 300
TYPE = "x-local-random"


@pytest.fixture
def lrx(conn, cleanup, uid):
    """A channel, once the broker is known to have the type (else skip)."""
    ch = conn.channel()
    try:
        ch.exchange_declare(f"lrx-probe-{uid}", TYPE, auto_delete=True)
    except (ChannelClosedByBroker, ConnectionClosedByBroker) as e:
        pytest.skip(f"the broker has no {TYPE} exchange: {e}")
    cleanup["exchanges"].append(f"lrx-probe-{uid}")
    return conn.channel()


def local_random(ch, cleanup, uid, tag="x", **kw) -> str:
    return make_exchange(ch, cleanup, f"lrx-{tag}-{uid}", TYPE, **kw)


def bound(ch, exchange: str, n: int) -> list[str]:
    out = []
    for _ in range(n):
        q = new_queue(ch)
        ch.queue_bind(q, exchange, "")
        out.append(q)
    return out


def counts(conn, qs, total: int) -> list[int]:
    assert wait_until(lambda: sum(message_count(conn, q) for q in qs) >= total, 15)
    return [message_count(conn, q) for q in qs]


def refused_bind(conn, queue: str, exchange: str, key: str = "", **kw) -> int:
    chan = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        chan.queue_bind(queue, exchange, key, **kw)
    return e.value.reply_code


def test_each_message_reaches_one_bound_queue_whatever_its_key(conn, lrx, cleanup, uid):
    x = local_random(lrx, cleanup, uid)
    qs = bound(lrx, x, 3)
    for i in range(N):
        lrx.basic_publish(x, f"key-{i}" if i % 2 else "", b"m")
    got = counts(conn, qs, N)
    assert sum(got) == N  # one copy each
    assert all(c > 0 for c in got), got  # each queue picked at some point: (2/3)^300 otherwise


def test_queues_of_another_node_are_passed_over(conn, lrx, cleanup, uid):
    """Under WARREN_TEST_CLUSTER a named queue lives on node 1 and a server-named exclusive one on
    node 2, the publisher's: only the latter is local. On one node both are."""
    x = local_random(lrx, cleanup, uid)
    named = make_queue(lrx, cleanup, f"lrx-named-{uid}")
    lrx.queue_bind(named, x, "")
    exclusive = bound(lrx, x, 1)[0]
    for _ in range(N):
        lrx.basic_publish(x, "", b"m")
    got = counts(conn, [named, exclusive], N)
    assert sum(got) == N
    if CLUSTER_MODE:
        assert got == [0, N]
    else:
        assert all(c > 0 for c in got), got


def test_sender_selected_keys_add_no_copies(conn, lrx, cleanup, uid):
    x = local_random(lrx, cleanup, uid)
    qs = bound(lrx, x, 2)
    props = pika.BasicProperties(headers={"CC": ["a", "b", "c"]})
    for _ in range(50):
        lrx.basic_publish(x, "k", b"m", properties=props)
    assert sum(counts(conn, qs, 50)) == 50


def test_without_a_bound_queue_the_message_is_unroutable(conn, lrx, cleanup, uid):
    x = local_random(lrx, cleanup, uid)
    lrx.confirm_delivery()
    with pytest.raises(UnroutableError):
        lrx.basic_publish(x, "", b"nowhere", mandatory=True)
    # once the only queue is unbound, unroutable again
    q = new_queue(lrx)
    lrx.queue_bind(q, x, "")
    lrx.queue_unbind(q, x, "")
    with pytest.raises(UnroutableError):
        lrx.basic_publish(x, "", b"nowhere", mandatory=True)


def test_an_alternate_exchange_takes_what_no_local_queue_does(conn, lrx, cleanup, uid):
    ae_queue = make_queue(lrx, cleanup, f"lrx-ae-q-{uid}")
    ae = make_exchange(lrx, cleanup, f"lrx-ae-{uid}", "fanout")
    lrx.queue_bind(ae_queue, ae, "")
    x = local_random(lrx, cleanup, uid, arguments={"alternate-exchange": ae})
    lrx.basic_publish(x, "", b"to-the-ae")
    assert wait_until(lambda: message_count(conn, ae_queue) == 1, 10)


def test_bindings_take_the_empty_key_and_classic_queues_only(conn, lrx, cleanup, uid):
    x = local_random(lrx, cleanup, uid)
    q = new_queue(lrx)
    assert refused_bind(conn, q, x, "rk") == PRECONDITION_FAILED
    quorum = make_queue(conn.channel(), cleanup, f"lrx-qq-{uid}", durable=True,
                        arguments={"x-queue-type": "quorum"})
    assert refused_bind(conn, quorum, x) == PRECONDITION_FAILED
    # an exchange as destination: refused; as source of a binding to this type: taken
    other = make_exchange(lrx, cleanup, f"lrx-other-{uid}", "fanout")
    chan = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        chan.exchange_bind(other, x, "")
    assert e.value.reply_code == PRECONDITION_FAILED
    lrx.exchange_bind(x, other, "")
    # binding arguments are taken
    lrx.queue_bind(q, x, "", arguments={"any": "thing"})


def test_a_delayed_message_exchange_routing_so_checks_its_bindings_so(conn, lrx, cleanup, uid):
    try:
        x = make_exchange(conn.channel(), cleanup, f"lrx-delayed-{uid}", "x-delayed-message",
                          arguments={"x-delayed-type": TYPE})
    except (ChannelClosedByBroker, ConnectionClosedByBroker) as e:
        pytest.skip(f"the broker has no x-delayed-message exchange: {e}")
    q = new_queue(lrx)
    assert refused_bind(conn, q, x, "rk") == PRECONDITION_FAILED
    quorum = make_queue(conn.channel(), cleanup, f"lrx-dqq-{uid}", durable=True,
                        arguments={"x-queue-type": "quorum"})
    assert refused_bind(conn, quorum, x) == PRECONDITION_FAILED
    lrx.queue_bind(q, x, "")


def test_declare_arguments_are_kept_and_compared(conn, lrx, cleanup, uid):
    x = local_random(lrx, cleanup, uid, arguments={"x-delayed-type": "direct"})
    lrx.exchange_declare(x, TYPE, arguments={"x-delayed-type": "direct"})
    chan = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as e:
        chan.exchange_declare(x, "direct", arguments={"x-delayed-type": "direct"})
    assert e.value.reply_code == PRECONDITION_FAILED


# --- the HTTP API -------------------------------------------------------------------------------

@pytest.fixture
def api(broker, lrx):
    if broker.http_port is None:
        pytest.skip("needs Warren's own HTTP API")
    base = broker.http_url_for("/")
    return lambda method, path, body=None: call(base, method, path, body)[:2]


def test_the_http_api_declares_lists_and_binds_it(conn, api, cleanup, uid):
    name = f"lrx-http-{uid}-{uuid.uuid4().hex[:4]}"
    cleanup["exchanges"].append(name)
    status, types = api("GET", "/api/overview")
    assert status == 200 and TYPE in [t["name"] for t in types["exchange_types"]]
    assert api("PUT", f"/api/exchanges/%2F/{quote(name, safe='')}", {"type": TYPE, "durable": False})[0] == 201
    status, info = api("GET", f"/api/exchanges/%2F/{quote(name, safe='')}")
    assert status == 200 and info["type"] == TYPE
    status, listed = api("GET", "/api/exchanges/%2F")
    assert status == 200 and any(e["name"] == name and e["type"] == TYPE for e in listed)

    ch = conn.channel()
    q = new_queue(ch)
    path = f"/api/bindings/%2F/e/{quote(name, safe='')}/q/{quote(q, safe='')}"
    assert api("POST", path, {"routing_key": "nope"})[0] == 400
    assert api("POST", path, {"routing_key": ""})[0] == 201
    status, answer = api("POST", f"/api/exchanges/%2F/{quote(name, safe='')}/publish",
                         {"routing_key": "ignored", "payload": "p", "payload_encoding": "string", "properties": {}})
    assert status == 200 and answer["routed"] is True
    assert wait_until(lambda: message_count(conn, q) == 1, 10)
