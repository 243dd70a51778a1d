"""End-to-end exchange tests over TCP with pika (RabbitMQ is the reference).

Covers the predeclared exchanges, declare/delete, passive declares, equivalence checks,
reserved names, durable and auto-delete exchanges, internal exchanges, exchange-to-exchange
bindings and `if-unused` deletion.
"""

from __future__ import annotations

import time

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from .helpers import (
    ACCESS_REFUSED, NOT_FOUND, PRECONDITION_FAILED, exists, get_body, make_exchange, make_queue,
    sync, wait_until,
)

pytestmark = pytest.mark.timeout(60)


def exchange_exists(conn, name: str) -> bool:
    return exists(conn, "exchange", name)


def get_after_a_pause(ch, queue: str, pause: float = 0.2):
    """basic.get (auto-ack) after `pause` seconds, to see whether anything more arrived; the
    method, None if the queue is empty."""
    time.sleep(pause)
    method, _, _ = ch.basic_get(queue, auto_ack=True)
    return method


# --------------------------------------------------------------------------- predeclared


@pytest.mark.parametrize(
    "name,kind",
    [
        ("amq.direct", "direct"),
        ("amq.fanout", "fanout"),
        ("amq.topic", "topic"),
        ("amq.headers", "headers"),
        ("amq.match", "headers"),
    ],
)
def test_predeclared_exchange_exists_and_passive_declare_succeeds(ch, name, kind):
    ok = ch.exchange_declare(name, exchange_type=kind, passive=True)
    assert isinstance(ok.method, pika.spec.Exchange.DeclareOk)


def test_predeclared_exchanges_pass_a_passive_declare_on_one_channel(ch):
    for name in ("amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"):
        ch.exchange_declare(name, passive=True)
    assert ch.is_open


def test_passive_declare_of_the_default_exchange_is_refused_with_403_as_in_rabbitmq(ch):
    # The default exchange exists (see the next test), but exchange.declare asserts a non-empty
    # name ("notnull" in the 0-9-1 spec) and RabbitMQ answers any declare of "" -- passive or not --
    # with 403 ACCESS_REFUSED "operation not permitted on the default exchange".
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare("", passive=True)
    assert ei.value.reply_code == ACCESS_REFUSED


def test_default_exchange_routes_to_the_queue_named_by_the_routing_key(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"dflt-{uid}")
    ch.basic_publish("", q, b"hello")
    assert get_body(ch, q) == b"hello"


def test_binding_a_queue_to_the_default_exchange_is_refused_with_403(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"dfltbind-{uid}")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.queue_bind(q, "", routing_key="x")
    assert ei.value.reply_code == ACCESS_REFUSED


# --------------------------------------------------------------------------- declare / delete


@pytest.mark.parametrize("kind", ["direct", "fanout", "topic", "headers"])
def test_declared_exchange_exists_until_it_is_deleted(conn, ch, cleanup, uid, kind):
    name = f"ex-{kind}-{uid}"
    cleanup["exchanges"].append(name)
    ok = ch.exchange_declare(name, exchange_type=kind)
    assert isinstance(ok.method, pika.spec.Exchange.DeclareOk)
    assert exchange_exists(conn, name)
    ok = ch.exchange_delete(name)
    assert isinstance(ok.method, pika.spec.Exchange.DeleteOk)
    assert not exchange_exists(conn, name)


def test_redeclaring_an_exchange_with_the_same_attributes_succeeds(ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-same-{uid}", "topic", durable=False)
    ch.exchange_declare(name, exchange_type="topic", durable=False)
    ch.exchange_declare(name, passive=True)


def test_passive_declare_of_a_missing_exchange_closes_the_channel_with_404(conn, ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare(f"missing-{uid}", passive=True)
    assert ei.value.reply_code == NOT_FOUND
    assert ch.is_closed
    # The error is a channel error: the connection stays usable.
    assert conn.is_open
    ch2 = conn.channel()
    ch2.exchange_declare("amq.direct", passive=True)


def test_passive_declare_with_a_different_type_is_not_an_equivalence_check(ch, cleanup, uid):
    # A passive declare only checks existence; the type and flags given are ignored.
    name = make_exchange(ch, cleanup, f"ex-pass-{uid}", "direct")
    ch.exchange_declare(name, exchange_type="fanout", passive=True)
    assert ch.is_open


def test_redeclaring_an_exchange_with_a_different_type_fails_with_406(conn, ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-type-{uid}", "direct")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare(name, exchange_type="fanout")
    assert ei.value.reply_code == PRECONDITION_FAILED
    # The original exchange is untouched.
    ch2 = conn.channel()
    ch2.exchange_declare(name, exchange_type="direct")


def test_redeclaring_an_exchange_with_a_different_durable_flag_fails_with_406(ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-dur-{uid}", "direct", durable=False)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare(name, exchange_type="direct", durable=True)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_redeclaring_a_predeclared_exchange_with_a_different_type_fails_with_406(ch):
    # The equivalence check comes before the reserved-name check: 406, not 403.
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare("amq.direct", exchange_type="fanout", durable=True)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_redeclaring_a_predeclared_exchange_with_equivalent_attributes_succeeds(ch):
    # Spec: a client MAY declare an "amq." exchange if it already exists. The predeclared
    # exchanges are durable, so only a durable redeclare is equivalent.
    for name, kind in (("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
                       ("amq.headers", "headers"), ("amq.match", "headers")):
        ok = ch.exchange_declare(name, exchange_type=kind, durable=True)
        assert isinstance(ok.method, pika.spec.Exchange.DeclareOk)


def test_predeclared_exchanges_are_durable_so_a_non_durable_redeclare_fails_with_406(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare("amq.topic", exchange_type="topic", durable=False)
    assert ei.value.reply_code == PRECONDITION_FAILED


def test_passive_declare_of_a_missing_amq_exchange_fails_with_404_not_403(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare("amq.foo", passive=True)
    assert ei.value.reply_code == NOT_FOUND


def test_declaring_an_exchange_with_the_reserved_amq_prefix_is_refused_with_403(conn, ch, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare(f"amq.foo-{uid}", exchange_type="direct")
    assert ei.value.reply_code == ACCESS_REFUSED
    assert not exchange_exists(conn, f"amq.foo-{uid}")


def test_declaring_an_exchange_named_amq_foo_is_refused_with_403(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_declare("amq.foo", exchange_type="direct")
    assert ei.value.reply_code == ACCESS_REFUSED


def test_declaring_an_exchange_of_an_unknown_type_is_refused_with_503(conn, uid):
    # RabbitMQ closes the *connection* with 503 COMMAND_INVALID ("invalid exchange type").
    ch = conn.channel()
    with pytest.raises((ChannelClosedByBroker, pika.exceptions.ConnectionClosedByBroker)) as ei:
        ch.exchange_declare(f"ex-bogus-{uid}", exchange_type="no-such-type")
    assert ei.value.reply_code == 503


def test_deleting_a_missing_exchange_succeeds(ch, uid):
    # AMQP 0-9-1 (and RabbitMQ since 3.2): exchange.delete of a missing exchange is a no-op.
    ok = ch.exchange_delete(f"never-declared-{uid}")
    assert isinstance(ok.method, pika.spec.Exchange.DeleteOk)


def test_deleting_the_default_exchange_is_refused_with_403(ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_delete("")
    assert ei.value.reply_code == ACCESS_REFUSED


def test_deleting_a_predeclared_amq_exchange_is_refused_with_403(conn, ch):
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_delete("amq.direct")
    assert ei.value.reply_code == ACCESS_REFUSED
    assert exchange_exists(conn, "amq.direct")


def test_deleting_an_exchange_removes_its_bindings(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-delb-{uid}")
    ex = make_exchange(ch, cleanup, f"ex-delb-{uid}", "fanout")
    ch.queue_bind(q, ex)
    ch.exchange_delete(ex)
    # Re-creating it gives a fresh exchange without the old binding.
    ch.exchange_declare(ex, exchange_type="fanout")
    ch.basic_publish(ex, "", b"after")
    method = get_after_a_pause(ch, q)
    assert method is None


# --------------------------------------------------------------------------- durable / auto-delete


def test_durable_exchange_can_be_declared_and_passively_found(conn, ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-durable-{uid}", "topic", durable=True)
    assert exchange_exists(conn, name)
    ch.exchange_delete(name)


def test_auto_delete_exchange_survives_until_it_has_had_a_binding(conn, ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-ad-new-{uid}", "direct", auto_delete=True)
    time.sleep(0.2)
    assert exchange_exists(conn, name)


def test_auto_delete_exchange_goes_away_when_its_last_queue_binding_is_removed(conn, ch, cleanup, uid):
    q1 = make_queue(ch, cleanup, f"q-ad1-{uid}")
    q2 = make_queue(ch, cleanup, f"q-ad2-{uid}")
    name = make_exchange(ch, cleanup, f"ex-ad-{uid}", "direct", auto_delete=True)
    ch.queue_bind(q1, name, routing_key="k1")
    ch.queue_bind(q2, name, routing_key="k2")
    ch.queue_unbind(q1, name, routing_key="k1")
    assert exchange_exists(conn, name), "exchange deleted while it still had a binding"
    ch.queue_unbind(q2, name, routing_key="k2")
    assert wait_until(lambda: not exchange_exists(conn, name))


def test_auto_delete_exchange_goes_away_when_its_only_bound_queue_is_deleted(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-adq-{uid}")
    name = make_exchange(ch, cleanup, f"ex-adq-{uid}", "fanout", auto_delete=True)
    ch.queue_bind(q, name)
    ch.queue_delete(q)
    assert wait_until(lambda: not exchange_exists(conn, name))


def test_auto_delete_exchange_goes_away_when_its_last_exchange_binding_is_removed(conn, ch, cleanup, uid):
    src = make_exchange(ch, cleanup, f"ex-ads-{uid}", "fanout", auto_delete=True)
    dst = make_exchange(ch, cleanup, f"ex-add-{uid}", "fanout")
    ch.exchange_bind(destination=dst, source=src)
    ch.exchange_unbind(destination=dst, source=src)
    assert wait_until(lambda: not exchange_exists(conn, src))
    assert exchange_exists(conn, dst)


# --------------------------------------------------------------------------- internal


def test_publishing_to_an_internal_exchange_closes_the_channel_with_403(conn, ch, cleanup, uid):
    name = make_exchange(ch, cleanup, f"ex-int-{uid}", "fanout", internal=True)
    ch.basic_publish(name, "", b"nope")
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == ACCESS_REFUSED
    assert conn.is_open


def test_internal_exchange_still_routes_messages_arriving_through_an_exchange_binding(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-int-{uid}")
    src = make_exchange(ch, cleanup, f"ex-int-src-{uid}", "fanout")
    internal = make_exchange(ch, cleanup, f"ex-int-dst-{uid}", "fanout", internal=True)
    ch.exchange_bind(destination=internal, source=src)
    ch.queue_bind(q, internal)
    ch.basic_publish(src, "", b"via-internal")
    assert get_body(ch, q) == b"via-internal"


# --------------------------------------------------------------------------- publishing errors


def test_publishing_to_a_missing_exchange_closes_the_channel_with_404(conn, ch, uid):
    ch.basic_publish(f"no-such-ex-{uid}", "k", b"x")
    with pytest.raises(ChannelClosedByBroker) as ei:
        sync(ch)
    assert ei.value.reply_code == NOT_FOUND
    assert conn.is_open
    conn.channel().exchange_declare("amq.direct", passive=True)


# --------------------------------------------------------------------------- exchange-to-exchange


def test_exchange_bind_forwards_messages_from_source_to_a_queue_bound_to_destination(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-e2e-{uid}")
    src = make_exchange(ch, cleanup, f"e2e-src-{uid}", "direct")
    dst = make_exchange(ch, cleanup, f"e2e-dst-{uid}", "direct")
    ok = ch.exchange_bind(destination=dst, source=src, routing_key="rk")
    assert isinstance(ok.method, pika.spec.Exchange.BindOk)
    ch.queue_bind(q, dst, routing_key="rk")

    ch.basic_publish(src, "rk", b"through")
    ch.basic_publish(src, "other", b"filtered-by-e2e-binding")
    assert get_body(ch, q) == b"through"
    method = get_after_a_pause(ch, q)
    assert method is None


def test_exchange_unbind_stops_forwarding(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-e2eu-{uid}")
    src = make_exchange(ch, cleanup, f"e2e-usrc-{uid}", "fanout")
    dst = make_exchange(ch, cleanup, f"e2e-udst-{uid}", "fanout")
    ch.exchange_bind(destination=dst, source=src)
    ch.queue_bind(q, dst)
    ch.basic_publish(src, "", b"before")
    assert get_body(ch, q) == b"before"

    ok = ch.exchange_unbind(destination=dst, source=src)
    assert isinstance(ok.method, pika.spec.Exchange.UnbindOk)
    ch.basic_publish(src, "", b"after")
    ch.basic_publish(dst, "", b"direct-to-destination")
    assert get_body(ch, q) == b"direct-to-destination"
    method = get_after_a_pause(ch, q)
    assert method is None


def test_a_message_reaching_a_queue_by_two_paths_is_delivered_once(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-e2edup-{uid}")
    src = make_exchange(ch, cleanup, f"e2e-dup-src-{uid}", "fanout")
    dst = make_exchange(ch, cleanup, f"e2e-dup-dst-{uid}", "fanout")
    ch.exchange_bind(destination=dst, source=src)
    ch.queue_bind(q, src)
    ch.queue_bind(q, dst)
    ch.basic_publish(src, "", b"once")
    assert get_body(ch, q) == b"once"
    method = get_after_a_pause(ch, q)
    assert method is None


def test_exchange_binding_cycles_do_not_loop_forever(ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-e2ecyc-{uid}")
    a = make_exchange(ch, cleanup, f"e2e-cyc-a-{uid}", "fanout")
    b = make_exchange(ch, cleanup, f"e2e-cyc-b-{uid}", "fanout")
    ch.exchange_bind(destination=b, source=a)
    ch.exchange_bind(destination=a, source=b)
    ch.queue_bind(q, b)
    ch.basic_publish(a, "", b"cycle")
    assert get_body(ch, q) == b"cycle"
    method = get_after_a_pause(ch, q)
    assert method is None


def test_exchange_bind_with_a_missing_source_fails_with_404(ch, cleanup, uid):
    dst = make_exchange(ch, cleanup, f"e2e-nsrc-{uid}", "fanout")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_bind(destination=dst, source=f"missing-{uid}")
    assert ei.value.reply_code == NOT_FOUND


# --------------------------------------------------------------------------- if-unused


def test_exchange_delete_if_unused_on_an_exchange_with_a_queue_binding_fails_with_406(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-iu-{uid}")
    name = make_exchange(ch, cleanup, f"ex-iu-{uid}", "direct")
    ch.queue_bind(q, name, routing_key="k")
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_delete(name, if_unused=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert exchange_exists(conn, name)


def test_exchange_delete_if_unused_on_a_source_of_an_exchange_binding_fails_with_406(conn, ch, cleanup, uid):
    src = make_exchange(ch, cleanup, f"ex-iu-src-{uid}", "fanout")
    dst = make_exchange(ch, cleanup, f"ex-iu-dst-{uid}", "fanout")
    ch.exchange_bind(destination=dst, source=src)
    with pytest.raises(ChannelClosedByBroker) as ei:
        ch.exchange_delete(src, if_unused=True)
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert exchange_exists(conn, src)


def test_exchange_delete_if_unused_succeeds_once_the_bindings_are_gone(conn, ch, cleanup, uid):
    q = make_queue(ch, cleanup, f"q-iu2-{uid}")
    name = make_exchange(ch, cleanup, f"ex-iu2-{uid}", "direct")
    ch.queue_bind(q, name, routing_key="k")
    ch.queue_unbind(q, name, routing_key="k")
    ch.exchange_delete(name, if_unused=True)
    assert not exchange_exists(conn, name)
