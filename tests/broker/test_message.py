"""Message: delivery-mode read without decoding, and what equal messages share (memory)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tests.codec.test_properties import hostile_lists
from warren.broker.message import Message
from warren.codec.properties import properties_error
from warren.errors import SyntaxError_
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.message import decode_message, encode_message


@pytest.mark.parametrize("props", [
    BasicProperties(),
    BasicProperties(delivery_mode=2),
    BasicProperties(delivery_mode=1),
    BasicProperties(content_type="text/plain", delivery_mode=2),
    BasicProperties(content_encoding="gzip", delivery_mode=2, priority=3),
    BasicProperties(headers={"a": 1, "nested": {"b": "c"}}, delivery_mode=2),
    BasicProperties(content_type="application/json", content_encoding="utf-8", headers={"x": [1, 2]},
                    delivery_mode=2, expiration="100"),
    BasicProperties(content_type="t", headers={}, delivery_mode=1, message_id="m"),
], ids=lambda p: repr(p)[:60])
def test_persistence_is_read_from_the_octets_as_a_full_decode_would(props):
    encoded = props.encode()
    msg = Message("ex", "rk", encoded, b"body")
    assert msg.persistent == (BasicProperties.decode(encoded, 0)[0].delivery_mode == 2)
    assert msg._decoded is None  # nothing decoded (and kept) just to know that


def test_a_property_list_cut_before_delivery_mode_is_a_syntax_error():
    encoded = BasicProperties(content_type="text/plain", delivery_mode=2).encode()
    with pytest.raises(SyntaxError_):
        Message("ex", "rk", encoded[:5], b"body")


def test_equal_names_are_one_object_shared_by_every_message():
    # built from distinct str objects, as the decoder makes one per publish
    a = Message("".join(["amq.", "direct"]), "".join(["orders.", "eu"]), b"\x00\x00", b"1")
    b = Message("".join(["amq.d", "irect"]), "".join(["orders", ".eu"]), b"\x00\x00", b"2")
    assert a.routing_key is b.routing_key and a.routing_key_ss is b.routing_key_ss
    assert a.exchange is b.exchange and a.exchange_ss is b.exchange_ss
    assert a.routing_key_ss == b"\x09orders.eu" and a.exchange_ss == b"\x0aamq.direct"


def test_the_store_record_is_dropped_once_routed_and_made_again_if_needed():
    msg = Message("ex", "rk", BasicProperties(delivery_mode=2).encode(), bytearray(b"body"))
    record = msg.record
    assert msg.record is record  # shared by every queue of one publish
    msg.routed()
    assert msg._record is None
    assert msg.record == record


@given(st.binary(max_size=80), st.binary(max_size=80), st.sampled_from([b"\x00\x00", b"\x10\x00\x02"]),
       st.binary(max_size=200))
def test_the_store_record_is_encode_message_of_the_names(exchange, routing_key, properties, body):
    """Message.record joins the names' cached shortstrs; the octets must be the store format's.
    Names are any octets a client can send, decoded as the codec does (surrogateescape)."""
    exchange = exchange.decode("utf-8", "surrogateescape")
    routing_key = routing_key.decode("utf-8", "surrogateescape")
    m = Message(exchange, routing_key, properties, body)
    assert m.record == encode_message(exchange, routing_key, properties, body)
    assert decode_message(m.record) == (exchange, routing_key, properties, body)


def test_the_store_record_of_names_with_escaped_octets():
    name = b"caf\xc3\xa9-\xff".decode("utf-8", "surrogateescape")  # valid UTF-8 and a stray octet
    m = Message(name, name, b"\x00\x00", b"x")
    assert m.record == encode_message(name, name, b"\x00\x00", b"x")


# --- hostile property lists (issue 16) ----------------------------------------------------------


@settings(max_examples=300)
@given(hostile_lists)
def test_decoding_any_property_list_gives_properties_or_a_502_nothing_else(props):
    """The edge refuses malformed lists (541); what decodes them later (headers routing, TTL,
    dead-lettering) must still fail cleanly, never with an IndexError or a RecursionError."""
    try:
        msg = Message("ex", "rk", props, b"")
        decoded = msg.decoded
    except SyntaxError_:
        assert properties_error(props) is not None  # whatever the edge lets through decodes
        return
    assert decoded.headers is None or isinstance(decoded.headers, dict)


def test_untrack_takes_a_message_out_of_the_collectors_sight_and_leaves_it_whole():
    """Messages never form cycles, so the speedups' untrack may hide them from collections
    (a run of publishes does, channel.py); an untracked message works as before."""
    import gc

    from warren.broker import message as message_module

    m = Message("ex", "rk", b"\x90\x00\x0atext/plain\x01", b"body")
    assert gc.is_tracked(m)  # made tracked: a lone publish pays nothing for this
    if message_module.untrack is None:
        pytest.skip("warren.broker._messages is not built: messages stay tracked")
    message_module.untrack(m)
    assert not gc.is_tracked(m)
    assert m.decoded.content_type == "text/plain" and m.record == Message("ex", "rk", m.properties, b"body").record
    message_module.untrack(m)  # twice is harmless
    assert not gc.is_tracked(m)
