"""1.0 messages to the broker's 0-9-1 property list and back (RabbitMQ 4's mapping, docs/versions.md)."""

import datetime
import uuid

import pytest

from warren.broker.message import Message
from warren.codec.amqp1_0 import types as t
from warren.protocol.amqp1_0.message import AMQP10_TYPE, PROPERTIES_HEADER, from_broker, parse, to_broker
from warren.spec import amqp1_0 as spec
from warren.spec.amqp0_9_1 import BasicProperties


def section(code, value) -> bytes:
    return t.encode(t.Described(t.ULong(code), value))


def message(*sections) -> bytes:
    return b"".join(sections)


def test_every_mapped_field_goes_to_0_9_1_and_back():
    mid = uuid.uuid4()
    payload = message(
        t.encode(spec.Header(durable=True, priority=7, ttl=60000)),
        section(0x72, {t.Symbol("x-opt-thing"): "v", t.Symbol("x-basic-type"): "order", t.Symbol("x-cc"): ["a"]}),
        t.encode(spec.Properties(message_id=mid, user_id=b"guest", to="/queues/q", subject="s", reply_to="r",
                                 correlation_id="c-1", content_type=t.Symbol("text/plain"),
                                 content_encoding=t.Symbol("gzip"), creation_time=t.Timestamp(1_700_000_000_123),
                                 group_id="g")),
        section(0x74, {"k": "v", "n": t.Int(5), "b": True, "bin": b"\x00"}),
        section(0x75, b"hello "), section(0x75, b"world"))
    props, body = to_broker(parse(payload))
    b, _ = BasicProperties.decode(props, 0)
    assert body == b"hello world"
    assert (b.delivery_mode, b.priority, b.expiration) == (2, 7, "60000")
    assert b.message_id == f"urn:uuid:{mid}" and b.correlation_id == "c-1" and b.user_id == "guest"
    assert (b.reply_to, b.content_type, b.content_encoding, b.app_id, b.type) == ("r", "text/plain", "gzip", "g", "order")
    assert b.timestamp == 1_700_000_000
    assert b.headers["k"] == "v" and b.headers["n"] == 5 and b.headers["b"] is True and b.headers["bin"] == b"\x00"
    assert b.headers["x-opt-thing"] == "v" and b.headers["CC"] == ["a"] and PROPERTIES_HEADER in b.headers
    # back to 1.0: the same fields, to and subject from x-amqp-1.0-properties
    out = parse(from_broker(Message("amq.direct", "rk", props, body), redelivered=True))
    p = out.properties
    assert (p.message_id, p.to, p.subject, p.reply_to, p.correlation_id, p.group_id) == (mid, "/queues/q", "s", "r", "c-1", "g")
    assert p.user_id == b"guest" and p.content_type == "text/plain" and p.creation_time == 1_700_000_000_000
    assert out.header[0] is True and out.header[1] == 7 and out.header[2] == 60000 and out.header[4] == 1
    assert out.application_properties == {"k": "v", "n": 5, "b": True, "bin": b"\x00"}
    ma = out.message_annotations
    assert ma["x-exchange"] == "amq.direct" and ma["x-routing-key"] == "rk" and ma["x-opt-thing"] == "v"
    assert ma["x-cc"] == ["a"] and ma["x-basic-type"] == "order"
    assert out.body == [(0x75, b"hello world")]


def test_a_header_without_priority_sets_none_and_no_header_no_delivery_mode():
    b, _ = BasicProperties.decode(to_broker(parse(message(section(0x70, [False]), section(0x75, b""))))[0], 0)
    assert b.delivery_mode == 1 and b.priority is None
    b, _ = BasicProperties.decode(to_broker(parse(section(0x75, b"x")))[0], 0)
    assert b.delivery_mode is None


def test_non_string_ids_go_to_headers_or_decimal_and_come_back_as_sent():
    payload = message(t.encode(spec.Properties(message_id=t.ULong(42), correlation_id=b"\x01\x02")), section(0x75, b""))
    props, _ = to_broker(parse(payload))
    b, _ = BasicProperties.decode(props, 0)
    assert b.message_id == "42" and b.correlation_id is None and b.headers["x-correlation-id"] == b"\x01\x02"
    p = parse(from_broker(Message("", "q", props, b""), False)).properties
    assert p.message_id == t.ULong(42) and type(p.message_id) is t.ULong and p.correlation_id == b"\x01\x02"


def test_an_amqp_value_body_travels_encoded_with_type_amqp_1_0():
    body = section(0x77, {"a": [1, 2]})
    props, octets = to_broker(parse(body))
    b, _ = BasicProperties.decode(props, 0)
    assert b.type == AMQP10_TYPE and octets == body
    assert parse(from_broker(Message("", "q", props, octets), False)).body == [(0x77, {"a": [1, 2]})]


def test_a_0_9_1_message_becomes_a_data_section_with_its_headers_split():
    props = BasicProperties(headers={"a": 1, "x-b": "c", "tbl": {"n": 1}, "when": datetime.datetime(2024, 1, 1)},
                            delivery_mode=2, message_id="m", timestamp=10).encode()
    out = parse(from_broker(Message("", "q", props, b"body"), False))
    assert out.body == [(0x75, b"body")] and out.header[0] is True and out.header[3] is True
    assert out.application_properties["a"] == 1 and "tbl" not in out.application_properties
    assert out.application_properties["when"] == t.Timestamp(1704067200000)
    assert out.message_annotations["x-b"] == "c"
    assert out.properties.message_id == "m" and out.properties.creation_time == 10_000


@pytest.mark.parametrize("payload, reason", [
    (b"\x41", "not a described value"),
    (t.encode(spec.Header()) + section(0x75, b"x") + t.encode(spec.Header()), "twice"),
    (section(0x77, 1) + section(0x77, 2), "two amqp-value"),
    (section(0x75, b"x") + section(0x76, [1]), "mixes body"),
    (section(0x75, "str"), "not binary"),
    (t.encode(t.Described(t.ULong(0x99), 1)), "not a message section"),
])
def test_malformed_messages_are_decode_errors(payload, reason):
    with pytest.raises(t.DecodeError, match=reason):
        parse(payload)


def test_sections_out_of_the_spec_order_are_taken_as_proton_sends_them():
    # a management request from RabbitMQ's client (Qpid Proton): amqp-value, then properties
    s = parse(section(0x77, None) + t.encode(spec.Properties(message_id="m", to="/queues/q", subject="GET")))
    assert s.body == [(0x77, None)] and s.properties.subject == "GET"


def test_messages_published_alike_share_their_encoded_head_and_keep_their_own_body():
    from warren.protocol.amqp1_0 import message as m
    props = BasicProperties(content_type="text/plain", headers={"k": "v"}).encode()
    first = from_broker(Message("x", "rk", props, b"one"), False)
    assert from_broker(Message("x", "rk", props, b"one"), False) == first
    assert parse(from_broker(Message("x", "rk", props, b"two"), False)).body == [(0x75, b"two")]
    again = parse(from_broker(Message("x", "rk", props, b"one"), True))
    assert again.header[4] == 1  # redelivered: another head (delivery-count 1)
    m._HEADS.clear()
    assert from_broker(Message("x", "rk", props, b"one"), False) == first
