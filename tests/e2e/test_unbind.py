"""Unbinding what is already gone (issue 12 point 2), through pika.

RabbitMQ 3.x makes queue.unbind and exchange.unbind idempotent: a queue, exchange or binding
that does not exist is answered with unbind-ok (aio-pika's RPC patterns rely on it when they
close, test_aio_pika_patterns.py). What is still refused, checked against RabbitMQ 3.10: any
unbind naming the default exchange (403), and an existing binding of another connection's
exclusive queue (405); queue.bind keeps its 404 for what is missing.
"""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import ACCESS_REFUSED, NOT_FOUND, RESOURCE_LOCKED, connect


@pytest.fixture
def names(ch, cleanup, uid):
    """A queue q, exchanges x and x2, and names that exist nowhere."""
    q, x, x2 = f"ub-q-{uid}", f"ub-x-{uid}", f"ub-x2-{uid}"
    cleanup["queues"].append(q)
    cleanup["exchanges"].extend([x, x2])
    ch.queue_declare(q)
    ch.exchange_declare(x, "direct")
    ch.exchange_declare(x2, "direct")
    return {"q": q, "x": x, "x2": x2, "gone": f"ub-gone-{uid}", "gone2": f"ub-gone2-{uid}"}


@pytest.mark.parametrize("queue, exchange", [
    ("gone", "x"), ("q", "gone"), ("gone", "gone2"), ("q", "x"),  # the last: no such binding
], ids=["queue-gone", "exchange-gone", "both-gone", "no-binding"])
def test_queue_unbind_of_what_is_not_there_is_unbind_ok(conn, names, queue, exchange):
    ch = conn.channel()
    assert isinstance(ch.queue_unbind(names[queue], names[exchange], "k").method, pika.spec.Queue.UnbindOk)
    assert ch.is_open


@pytest.mark.parametrize("destination, source", [
    ("gone", "x"), ("x", "gone"), ("gone", "gone2"), ("x2", "x"),
], ids=["destination-gone", "source-gone", "both-gone", "no-binding"])
def test_exchange_unbind_of_what_is_not_there_is_unbind_ok(conn, names, destination, source):
    ch = conn.channel()
    assert isinstance(ch.exchange_unbind(names[destination], names[source], "k").method,
                      pika.spec.Exchange.UnbindOk)
    assert ch.is_open


def test_unbind_after_the_queue_was_deleted_is_unbind_ok_and_the_binding_is_gone(conn, names):
    ch = conn.channel()
    q, x = names["q"], names["x"]
    ch.queue_bind(q, x, "k")
    ch.queue_delete(q)
    ch.queue_unbind(q, x, "k")
    ch.queue_declare(q)  # a new queue of that name is not bound
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish(x, "k", b"routed?", mandatory=True)


def test_an_existing_binding_is_still_removed(conn, names):
    ch = conn.channel()
    q, x = names["q"], names["x"]
    ch.queue_bind(q, x, "k")
    ch.queue_unbind(q, x, "k")
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError):
        ch.basic_publish(x, "k", b"nowhere", mandatory=True)


@pytest.mark.parametrize("call", [
    lambda ch, n: ch.queue_unbind(n["q"], "", n["q"]),
    lambda ch, n: ch.queue_unbind(n["gone"], "", "k"),
    lambda ch, n: ch.exchange_unbind(n["x"], "", "k"),
    lambda ch, n: ch.exchange_unbind("", n["x"], "k"),
], ids=["queue", "queue-gone", "exchange-source", "exchange-destination"])
def test_unbind_naming_the_default_exchange_is_403(conn, names, call):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        call(ch, names)
    assert ei.value.reply_code == ACCESS_REFUSED
    assert ei.value.reply_text == "ACCESS_REFUSED - operation not permitted on the default exchange"


def test_another_connections_exclusive_queue_unbinds_only_what_it_does_not_have(broker, conn, names, uid):
    owner = connect(broker)
    try:
        och = owner.channel()
        q = f"ub-excl-{uid}"
        och.queue_declare(q, exclusive=True)
        och.queue_bind(q, names["x"], "k")
        ch = conn.channel()
        ch.queue_unbind(q, names["x"], "other-key")  # no such binding: unbind-ok
        with pytest.raises(ChannelClosedByBroker) as ei:
            ch.queue_unbind(q, names["x"], "k")
        assert ei.value.reply_code == RESOURCE_LOCKED
        assert ei.value.reply_text.startswith(f"RESOURCE_LOCKED - cannot obtain exclusive access to locked "
                                              f"queue '{q}' in vhost '/'")
        och.confirm_delivery()
        och.basic_publish(names["x"], "k", b"still bound", mandatory=True)  # routed: no UnroutableError
    finally:
        owner.close()


@pytest.mark.parametrize("queue, exchange, what", [("gone", "x", "queue"), ("q", "gone", "exchange")])
def test_queue_bind_to_what_is_missing_is_still_404(conn, names, queue, exchange, what):
    ch = conn.channel()
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(names[queue], names[exchange], "k")
    assert ei.value.reply_code == NOT_FOUND
    missing = names[queue] if what == "queue" else names[exchange]
    assert ei.value.reply_text == f"NOT_FOUND - no {what} '{missing}' in vhost '/'"
