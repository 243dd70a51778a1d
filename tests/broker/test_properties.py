"""Byte-level edits of an encoded basic property list (warren/codec/property_edits.py)."""

from __future__ import annotations

import pytest

from warren.codec.property_edits import headers_span, remove_header, replace_header, replace_reply_to
from warren.spec.fields import encode_value
from warren.spec.amqp0_9_1 import BasicProperties


def encoded(**kw) -> bytes:
    return BasicProperties(**kw).encode()


def decoded(props: bytes) -> BasicProperties:
    return BasicProperties.decode(props, 0)[0]


def test_remove_header_keeps_the_other_headers_and_properties():
    p = encoded(content_type="text/plain", content_encoding="gzip", headers={"a": 1, "BCC": ["x"], "b": "s"},
                delivery_mode=2, reply_to="r")
    out = decoded(remove_header(p, "BCC"))
    assert (out.headers, out.content_type, out.content_encoding, out.delivery_mode, out.reply_to) == (
        {"a": 1, "b": "s"}, "text/plain", "gzip", 2, "r")


def test_remove_header_keeps_type_tags_it_does_not_touch():
    # a short int ('s') and a byte ('b') would become 'I' if decoded and re-encoded
    table = b"\x01s" + b"s\x00\x07" + b"\x01b" + b"b\xff" + b"\x03BCC" + b"A\x00\x00\x00\x06S\x00\x00\x00\x01q"
    p = b"\x20\x00" + len(table).to_bytes(4, "big") + table
    out = remove_header(p, "BCC")
    assert out == b"\x20\x00" + (len(table) - 15).to_bytes(4, "big") + table[:-15]


def test_remove_absent_header_or_without_headers_returns_the_input():
    p = encoded(headers={"a": 1})
    assert remove_header(p, "BCC") is p
    q = encoded(message_id="m")
    assert remove_header(q, "BCC") is q and headers_span(q) is None


def test_replace_header_sets_the_new_value():
    p = encoded(headers={"x-delay": 500, "k": "v"}, priority=4)
    out = decoded(replace_header(p, "x-delay", encode_value(-500)))
    assert out.headers == {"x-delay": -500, "k": "v"} and out.priority == 4
    with pytest.raises(KeyError):
        replace_header(p, "absent", encode_value(1))


@pytest.mark.parametrize("kw", [{}, {"content_type": "a"}, {"headers": {"h": [1, "x"]}, "priority": 1,
                                                              "correlation_id": "c", "expiration": "10"}])
def test_replace_reply_to_changes_only_reply_to(kw):
    p = encoded(reply_to="amq.rabbitmq.reply-to", message_id="m", **kw)
    out = decoded(replace_reply_to(p, "amq.rabbitmq.reply-to.token"))
    assert out.reply_to == "amq.rabbitmq.reply-to.token" and out.message_id == "m"
    for k, v in kw.items():
        assert getattr(out, k) == v


def test_header_entries_keep_each_value_as_its_octets_in_wire_order():
    from warren.codec.property_edits import header_entries
    props = BasicProperties(content_type="text/plain", headers={"b": 1, "a": "x", "n": {"deep": [1, 2]}},
                            delivery_mode=2).encode()
    entries = header_entries(props)
    assert list(entries) == ["b", "a", "n"]
    assert entries["a"].data == encode_value("x") and entries["n"].data == encode_value({"deep": [1, 2]})
    assert header_entries(BasicProperties(delivery_mode=2).encode()) == {} and header_entries(b"") == {}
