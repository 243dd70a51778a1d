"""The 0-10 <-> 0-9-1 property mapping (warren.protocol.amqp0_10.properties): every field both
ways, header values by type, and round trips of application headers (hypothesis)."""

from __future__ import annotations

import uuid

from hypothesis import example, given
from hypothesis import strategies as st

from warren.codec.amqp0_10 import types as t
from warren.spec.fields import decode_table, encode_table
from warren.protocol.amqp0_10.properties import (
    CLUSTER_ID_HEADER, MESSAGE_ID_HEADER, TYPE_HEADER, from_basic, plain_arguments, to_basic,
)
from warren.spec import amqp0_10 as spec
from warren.spec.amqp0_9_1 import BasicProperties


def _basic(delivery, message) -> BasicProperties:
    return BasicProperties.decode(to_basic(delivery, message), 0)[0]


def test_every_field_to_0_9_1_and_back():
    mid = uuid.uuid4()
    dp = spec.MessageDeliveryProperties(priority=4, delivery_mode=2, ttl=1500, timestamp=1234567890,
                                        routing_key="rk", exchange="ignored")
    mp = spec.MessageMessageProperties(message_id=mid, correlation_id=b"c", content_type="ct",
                                       content_encoding="ce", user_id=b"u", app_id=b"a",
                                       reply_to=spec.MessageReplyTo(exchange="ex", routing_key="key"),
                                       application_headers={"qpid.subject": "s", TYPE_HEADER: "ty",
                                                            CLUSTER_ID_HEADER: "cl"})
    p = _basic(dp, mp)
    assert (p.priority, p.delivery_mode, p.expiration, p.timestamp) == (4, 2, "1500", 1234567890)
    assert (p.message_id, p.correlation_id, p.content_type, p.content_encoding) == (str(mid), "c", "ct", "ce")
    assert (p.user_id, p.app_id, p.reply_to, p.type, p.cluster_id) == ("u", "a", "ex/key", "ty", "cl")
    assert p.headers == {"qpid.subject": "s"}
    d2, m2 = from_basic(p, "amq.direct", "rk", True)
    assert (d2.priority, d2.delivery_mode, d2.ttl, d2.timestamp, d2.exchange, d2.routing_key, d2.redelivered) == (
        4, 2, 1500, 1234567890, "amq.direct", "rk", True)
    assert (m2.message_id, m2.correlation_id, m2.user_id, m2.app_id) == (mid, b"c", b"u", b"a")
    assert (m2.reply_to.exchange, m2.reply_to.routing_key) == ("ex", "key")
    assert m2.application_headers == {"qpid.subject": "s", TYPE_HEADER: "ty", CLUSTER_ID_HEADER: "cl"}


def test_no_properties_at_all():
    assert _basic(None, None).headers is None
    d, m = from_basic(BasicProperties(), "", "q", False)
    assert m is None and (d.routing_key, d.exchange, d.priority, d.delivery_mode) == ("q", "", None, None)


def test_a_message_id_that_is_no_uuid_travels_in_a_header_and_comes_back():
    d, m = from_basic(BasicProperties(message_id="order-17"), "", "q", False)
    assert m.message_id is None and m.application_headers == {MESSAGE_ID_HEADER: "order-17"}
    assert _basic(d, m).message_id == "order-17"


def test_integer_widths_keep_their_field_table_type():
    headers = {"i8": t.Int8(-1), "u8": t.UInt8(200), "i16": t.Int16(-300), "u16": t.UInt16(60000),
               "i32": t.Int32(-70000), "u32": t.UInt32(3_000_000_000), "i64": 1 << 50, "f": t.Float32(0.5),
               "d": 0.25, "b": True, "bin": b"\x00", "s8": t.Str8("x"), "dt": t.Datetime(1000),
               "uuid": uuid.UUID(int=1), "void": None, "list": [t.UInt8(1), "a"], "map": {"k": t.Int16(2)}}
    raw = to_basic(None, spec.MessageMessageProperties(application_headers=headers))
    tags = raw[raw.index(b"i8") + 2:raw.index(b"i8") + 3]
    assert tags == b"b"
    back = BasicProperties.decode(raw, 0)[0].headers
    assert back["u32"] == 3_000_000_000 and back["i16"] == -300 and back["f"] == 0.5 and back["b"] is True
    assert back["uuid"] == str(uuid.UUID(int=1)) and back["void"] is None and back["map"] == {"k": 2}
    assert int(back["dt"].timestamp()) == 1000 and back["list"] == [1, "a"]


@given(st.dictionaries(st.text(max_size=20), st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1), st.text(max_size=50), st.binary(max_size=50), st.booleans(),
    st.none(), st.floats(allow_nan=False))))
@example({"x-amqp-0-9-1.type": None})  # the name of a carried property, not one: stays a header (CI found it)
@example({"x-amqp-0-9-1.type": ""})  # carried as the type property, empty (CI found the test's own gap)
@example({"x-amqp-0-9-1.type": "0"})
@example({"x-amqp-0-9-1.cluster-id": "c" * 300, "x-amqp-0-9-1.message-id": 7})
def test_application_headers_survive_0_10_to_0_9_1_and_back(headers):
    mp = spec.MessageMessageProperties(application_headers=headers)
    p = BasicProperties.decode(to_basic(None, mp), 0)[0]
    # the headers through a 0-9-1 table's codec; the properties that carry some of them as they are
    p.headers = decode_table(encode_table(p.headers or {}), 0)[0] or None
    _, m = from_basic(p, "", "", False)
    assert (m.application_headers if m is not None else {}) == headers


def test_arguments_become_plain_values():
    args = plain_arguments({"x-max-length": t.UInt32(5), "name": t.Str8("n"), "id": uuid.UUID(int=2)})
    assert args == {"x-max-length": 5, "name": "n", "id": str(uuid.UUID(int=2))}
    assert type(args["x-max-length"]) is int and type(args["name"]) is str
