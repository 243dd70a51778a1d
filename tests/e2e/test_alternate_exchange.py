"""Alternate exchanges and their interplay with exchange-to-exchange bindings (pika).

RabbitMQ 3.10 is the reference (``rabbit_exchange:route``): an exchange whose own bindings
match nothing hands the message to its ``alternate-exchange``, recursively; cycles of AEs and
of e2e bindings terminate and deliver once; ``basic.return`` only when nothing routes at all.

Every publish goes through a confirm channel, so routing is finished when ``basic_publish``
returns and a mandatory message that comes back raises ``UnroutableError``.
"""

from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, UnroutableError

from .helpers import PRECONDITION_FAILED, exists, get_body, make_exchange, message_count, new_queue

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cch(conn):
    """A channel in confirm mode."""
    c = conn.channel()
    c.confirm_delivery()
    return c


def ex(ch, cleanup, uid, tag: str, kind: str = "direct", ae: str | None = None, **kw) -> str:
    args = {"alternate-exchange": ae} if ae is not None else None
    return make_exchange(ch, cleanup, f"ae-{tag}-{uid}", kind, arguments=args, **kw)


def returned(ch, exchange: str, key: str, body: bytes = b"m") -> bool:
    """Publish mandatory; True if the broker returned it (nothing routed)."""
    try:
        ch.basic_publish(exchange, key, body, mandatory=True)
    except UnroutableError:
        return True
    return False


def test_unroutable_message_goes_to_the_alternate_exchange(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q_alt, q_main = new_queue(cch), new_queue(cch)
    cch.queue_bind(q_alt, alt)
    cch.queue_bind(q_main, main, "k")
    assert not returned(cch, main, "other", b"lost")
    assert get_body(cch, q_alt) == b"lost"
    assert message_count(conn, q_main) == 0


def test_routable_message_does_not_go_to_the_alternate_exchange(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q_alt, q_main = new_queue(cch), new_queue(cch)
    cch.queue_bind(q_alt, alt)
    cch.queue_bind(q_main, main, "k")
    assert not returned(cch, main, "k", b"hit")
    assert get_body(cch, q_main) == b"hit"
    assert message_count(conn, q_alt) == 0


def test_message_keeps_exchange_and_routing_key_through_the_alternate(cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    cch.basic_publish(main, "orig-key", b"x", pika.BasicProperties(headers={"h": 1}))
    method, props, body = cch.basic_get(q, auto_ack=True)
    assert (method.exchange, method.routing_key, body, props.headers) == (main, "orig-key", b"x", {"h": 1})


def test_alternate_exchange_routes_with_its_own_type_and_the_same_key(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "topic")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q_a, q_b = new_queue(cch), new_queue(cch)
    cch.queue_bind(q_a, alt, "a.*")
    cch.queue_bind(q_b, alt, "b.*")
    assert not returned(cch, main, "a.1")
    assert (message_count(conn, q_a), message_count(conn, q_b)) == (1, 0)


def test_mandatory_message_is_returned_when_the_alternate_routes_nothing_either(cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "direct")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q = new_queue(cch)
    cch.queue_bind(q, alt, "only-this")
    assert returned(cch, main, "something-else")
    assert not returned(cch, main, "only-this")
    assert get_body(cch, q) == b"m"


def test_alternate_exchange_that_does_not_exist_is_ignored(cch, cleanup, uid):
    main = ex(cch, cleanup, uid, "main", ae=f"ae-missing-{uid}")
    assert returned(cch, main, "k")


def test_alternate_exchange_deleted_after_declare_is_ignored_then_used_again(cch, cleanup, uid):
    alt_name = f"ae-alt-{uid}"
    main = ex(cch, cleanup, uid, "main", ae=alt_name)
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    assert not returned(cch, main, "k")
    cch.exchange_delete(alt)
    assert returned(cch, main, "k")
    ex(cch, cleanup, uid, "alt", "fanout")
    cch.queue_bind(q, alt)
    assert not returned(cch, main, "k")
    assert get_body(cch, q) == b"m" and get_body(cch, q) == b"m"


def test_alternate_of_an_alternate_is_followed(cch, cleanup, uid):
    last = ex(cch, cleanup, uid, "last", "fanout")
    middle = ex(cch, cleanup, uid, "middle", "direct", ae=last)
    first = ex(cch, cleanup, uid, "first", "direct", ae=middle)
    q = new_queue(cch)
    cch.queue_bind(q, last)
    assert not returned(cch, first, "k", b"chain")
    assert get_body(cch, q) == b"chain"


def test_alternate_exchange_cycle_terminates_and_returns(cch, cleanup, uid):
    a_name, b_name = f"ae-cyc-a-{uid}", f"ae-cyc-b-{uid}"
    ex(cch, cleanup, uid, "cyc-a", ae=b_name)
    ex(cch, cleanup, uid, "cyc-b", ae=a_name)
    assert returned(cch, a_name, "k")
    assert returned(cch, b_name, "k")


def test_alternate_exchange_cycle_delivers_once(conn, cch, cleanup, uid):
    a_name, b_name = f"ae-cyc-a-{uid}", f"ae-cyc-b-{uid}"
    ex(cch, cleanup, uid, "cyc-a", ae=b_name)
    ex(cch, cleanup, uid, "cyc-b", ae=a_name)
    q = new_queue(cch)
    cch.queue_bind(q, b_name, "k")
    assert not returned(cch, a_name, "k")
    assert message_count(conn, q) == 1


def test_exchange_that_is_its_own_alternate_returns(cch, cleanup, uid):
    name = f"ae-self-{uid}"
    ex(cch, cleanup, uid, "self", ae=name)
    assert returned(cch, name, "k")


def test_internal_exchange_can_be_an_alternate(cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout", internal=True)
    main = ex(cch, cleanup, uid, "main", ae=alt)
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    assert not returned(cch, main, "k", b"via-internal")
    assert get_body(cch, q) == b"via-internal"


def test_headers_exchange_uses_its_alternate_when_no_binding_matches(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    main = ex(cch, cleanup, uid, "main", "headers", ae=alt)
    q_alt, q_main = new_queue(cch), new_queue(cch)
    cch.queue_bind(q_alt, alt)
    cch.queue_bind(q_main, main, arguments={"x-match": "all", "color": "red"})
    cch.basic_publish(main, "", b"red", pika.BasicProperties(headers={"color": "red"}))
    cch.basic_publish(main, "", b"blue", pika.BasicProperties(headers={"color": "blue"}))
    assert get_body(cch, q_main) == b"red"
    assert get_body(cch, q_alt) == b"blue"
    assert message_count(conn, q_alt) == 0


def test_alternate_exchange_argument_must_be_a_string(ch, cleanup, uid):
    with pytest.raises(ChannelClosedByBroker) as ei:
        make_exchange(ch, cleanup, f"ae-bad-{uid}", "direct", arguments={"alternate-exchange": 5})
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert "alternate-exchange" in ei.value.reply_text


def test_redeclare_with_another_alternate_is_406(conn, ch, cleanup, uid):
    name = ex(ch, cleanup, uid, "main", ae="one")
    with pytest.raises(ChannelClosedByBroker) as ei:
        conn.channel().exchange_declare(name, "direct", arguments={"alternate-exchange": "two"})
    assert ei.value.reply_code == PRECONDITION_FAILED
    assert exists(conn, "exchange", name)


# --------------------------------------------------------------------------- with e2e bindings


def test_e2e_destination_uses_its_own_alternate(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    dest = ex(cch, cleanup, uid, "dest", "direct", ae=alt)
    src = ex(cch, cleanup, uid, "src", "fanout")
    cch.exchange_bind(dest, src)
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    assert not returned(cch, src, "nothing-bound", b"e2e-ae")
    assert get_body(cch, q) == b"e2e-ae"


def test_source_routing_to_an_exchange_does_not_use_its_alternate(cch, cleanup, uid):
    # RabbitMQ: the source's bindings matched (an exchange), so its AE is not consulted even
    # though that exchange routes nowhere; the message is unroutable
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    dest = ex(cch, cleanup, uid, "dest", "direct")
    src = ex(cch, cleanup, uid, "src", "fanout", ae=alt)
    cch.exchange_bind(dest, src)
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    assert returned(cch, src, "k")


def test_alternate_exchange_may_forward_over_e2e_bindings(cch, cleanup, uid):
    final = ex(cch, cleanup, uid, "final", "topic")
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    main = ex(cch, cleanup, uid, "main", ae=alt)
    cch.exchange_bind(final, alt)
    q = new_queue(cch)
    cch.queue_bind(q, final, "#")
    assert not returned(cch, main, "a.b", b"far")
    assert get_body(cch, q) == b"far"


def test_e2e_binding_cycle_delivers_once(conn, cch, cleanup, uid):
    a = ex(cch, cleanup, uid, "a", "topic")
    b = ex(cch, cleanup, uid, "b", "topic")
    cch.exchange_bind(b, a, "#")
    cch.exchange_bind(a, b, "#")
    q = new_queue(cch)
    cch.queue_bind(q, b, "#")
    cch.queue_bind(q, a, "x.#")
    assert not returned(cch, a, "x.y")
    assert not returned(cch, b, "x.y")
    assert message_count(conn, q) == 2


def test_e2e_cycle_without_queues_is_returned_and_does_not_use_the_alternate(cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout")
    a = ex(cch, cleanup, uid, "a", "fanout", ae=alt)
    b = ex(cch, cleanup, uid, "b", "fanout", ae=alt)
    cch.exchange_bind(b, a)
    cch.exchange_bind(a, b)
    q = new_queue(cch)
    cch.queue_bind(q, alt)
    assert returned(cch, a, "k")


def test_e2e_cycle_through_alternates_delivers_once(conn, cch, cleanup, uid):
    # a --(AE)--> b --(e2e)--> c --(AE)--> a : the cycle closes through both kinds of edge
    a_name = f"ae-a-{uid}"
    c = ex(cch, cleanup, uid, "c", "direct", ae=a_name)
    b = ex(cch, cleanup, uid, "b", "fanout")
    ex(cch, cleanup, uid, "a", "direct", ae=b)
    cch.exchange_bind(c, b)
    q = new_queue(cch)
    assert returned(cch, a_name, "k")
    cch.queue_bind(q, c, "k")
    assert not returned(cch, a_name, "k")
    assert message_count(conn, q) == 1


def test_persistent_message_reaches_a_durable_queue_through_the_alternate(conn, cch, cleanup, uid):
    alt = ex(cch, cleanup, uid, "alt", "fanout", durable=True)
    main = ex(cch, cleanup, uid, "main", ae=alt, durable=True)
    q = f"ae-dq-{uid}"
    cch.queue_declare(q, durable=True)
    cleanup["queues"].append(q)
    cch.queue_bind(q, alt)
    cch.basic_publish(main, "k", b"kept", pika.BasicProperties(delivery_mode=2))
    assert get_body(cch, q) == b"kept"
