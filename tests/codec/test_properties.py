"""Property-list validation (warren.codec.properties): what RabbitMQ refuses is refused, what it
takes is taken, and whatever passes decodes in Warren and in pika (the consumer that lost its
connection in issue 16). The compiled twin is compared in tests/protocol/test_speedups.py."""

from __future__ import annotations

import datetime
import math
import struct
import sys

import pika.spec
import pytest
from hypothesis import given, settings, strategies as st

from tests.spec.test_fields import mutations, nested_table, tables
from warren.spec.fields import MAX_TABLE_DEPTH, TIMESTAMP_MAX, encode_table
from warren.codec.properties import properties_error, salvage_properties
from warren.spec.amqp0_9_1 import BasicProperties

shortstrs = st.binary(max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape"))
octets = st.integers(0, 255)


@st.composite
def property_objects(draw) -> BasicProperties:
    """Any basic properties our encoder can write, each present or absent."""
    def maybe(strategy):
        return draw(st.one_of(st.none(), strategy))
    return BasicProperties(
        content_type=maybe(shortstrs), content_encoding=maybe(shortstrs), headers=maybe(tables),
        delivery_mode=maybe(octets), priority=maybe(octets), correlation_id=maybe(shortstrs),
        reply_to=maybe(shortstrs), expiration=maybe(shortstrs), message_id=maybe(shortstrs),
        timestamp=maybe(st.integers(0, 2**64 - 1)), type=maybe(shortstrs), user_id=maybe(shortstrs),
        app_id=maybe(shortstrs), cluster_id=maybe(shortstrs))


valid_lists = property_objects().map(lambda p: p.encode())
#: near-valid octets (cut, extended, flipped, spliced) and random ones: what an attacker sends
hostile_lists = st.one_of(valid_lists.flatmap(mutations), st.binary(max_size=40),
                          st.binary(max_size=30).map(lambda b: b"\x20\x00" + b))


def table_props(entries: bytes) -> bytes:
    return b"\x20\x00" + struct.pack(">I", len(entries)) + entries


# Each refused by RabbitMQ 3.10.8 with connection.close 541 when published (raw frames).
REFUSED = {
    "unknown type Z": table_props(b"\x01kZ\x00"),
    "U is not a RabbitMQ type": table_props(b"\x01kU\x00\x01"),
    "table longer than the list": b"\x20\x00" + struct.pack(">I", 50) + b"\x01kI\x00\x00\x00\x01",
    "entry overruns its table": b"\x20\x00" + struct.pack(">I", 3) + b"\x01kI\x00\x00\x00\x01",
    "integer cut by its table": table_props(b"\x01kI\x00\x00"),
    "name past its table": table_props(b"\x09ab"),
    "content-type past the end": b"\x80\x00\x10abc",
    "flag without its property": b"\x80\x00",
    "octets after the last property": b"\x80\x00\x03abcXYZ",
    "octets after no property": b"\x00\x00XYZ",
    "continuation flag word": b"\x00\x01\x00\x00",
    "no flags": b"",
    "half a flag word": b"\x00",
    "timestamp cut short": b"\x00\x40\x00\x00\x00",
    "delivery-mode missing": b"\x10\x00",
}
# Each taken by RabbitMQ 3.10.8 and delivered.
TAKEN = {
    "no properties": b"\x00\x00",
    "unused flag bit 1": b"\x00\x02",
    "invalid UTF-8 in content-type": b"\x80\x00\x02\xff\xfe",
    "invalid UTF-8 in a header": table_props(b"\x01kS\x00\x00\x00\x02\xff\xfe"),
    "invalid UTF-8 in a header name": table_props(b"\x02\xff\xfeI\x00\x00\x00\x01"),
    "every RabbitMQ type": table_props(b"".join(b"\x01k" + t for t in (
        b"t\x01", b"b\x01", b"B\x01", b"s\x00\x01", b"u\x00\x01", b"I\x00\x00\x00\x01", b"i\x00\x00\x00\x01",
        b"l" + bytes(8), b"L" + bytes(8), b"f" + bytes(4), b"d" + bytes(8), b"D" + bytes(5),
        b"S\x00\x00\x00\x00", b"T" + bytes(8), b"x\x00\x00\x00\x00", b"V", b"F\x00\x00\x00\x00",
        b"A\x00\x00\x00\x00"))),
    "headers 100 deep": table_props(b"\x01kF" + nested_table(MAX_TABLE_DEPTH - 1)),
}


@pytest.mark.parametrize("props", REFUSED.values(), ids=REFUSED.keys())
def test_what_rabbitmq_refuses_is_malformed(props):
    assert properties_error(props) is not None


@pytest.mark.parametrize("props", TAKEN.values(), ids=TAKEN.keys())
def test_what_rabbitmq_takes_is_well_formed_and_decodes_in_warren_and_pika(props):
    assert properties_error(props) is None
    BasicProperties.decode(props, 0)
    pika.spec.BasicProperties().decode(props)


def test_stricter_than_rabbitmq_deep_tables_and_timestamps_past_9999():
    # RabbitMQ takes both; pika cannot decode either and loses its connection (docs/compatibility.md)
    assert "deep" in properties_error(table_props(b"\x01kF" + nested_table(MAX_TABLE_DEPTH)))
    assert "9999" in properties_error(table_props(b"\x01kT" + struct.pack(">Q", TIMESTAMP_MAX + 1)))
    assert properties_error(table_props(b"\x01kT" + struct.pack(">Q", TIMESTAMP_MAX))) is None
    # at Python's default recursion limit, as in a client process (warren ctl, run in-process by
    # other tests, raises the limit for the rest of this one)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises((RecursionError, ValueError, OverflowError)):
            pika.spec.BasicProperties().decode(table_props(b"\x01kF" + nested_table(2000)))
    finally:
        sys.setrecursionlimit(limit)


def test_the_property_timestamp_is_any_64_bit_value():
    assert properties_error(b"\x00\x40" + b"\xff" * 8) is None  # pika reads it as an integer


def test_a_slice_of_a_larger_buffer_is_checked_within_its_bounds():
    buf = bytearray(b"junk" + b"\x80\x00\x03abc" + b"more")
    assert properties_error(buf, 4, 10) is None
    assert properties_error(buf, 4, 9) is not None
    assert properties_error(buf, 4, 11) is not None


@settings(max_examples=100)
@given(valid_lists)
def test_every_list_our_encoder_writes_is_well_formed(props):
    assert properties_error(props) is None


@settings(max_examples=200)
@given(hostile_lists)
def test_whatever_passes_decodes_exactly_in_warren_and_in_pika(props):
    if properties_error(props) is not None:
        return
    decoded, end = BasicProperties.decode(props, 0)
    assert end == len(props)
    pika_props = pika.spec.BasicProperties()
    try:
        pika_props.decode(props)  # raises where a pika consumer would lose its connection
    except (ValueError, OverflowError):
        # pika turns f and d values into ints: NaN and infinities defeat it. They are taken,
        # as RabbitMQ takes them: valid IEEE values other clients read (docs/compatibility.md)
        assert has_non_finite_float(decoded.headers)
        return
    if decoded.headers is not None:
        assert isinstance(pika_props.headers, dict)


def has_non_finite_float(value) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_non_finite_float(v) for v in value)
    return False


@settings(max_examples=150)
@given(hostile_lists)
def test_salvage_always_gives_a_well_formed_list_and_keeps_a_good_one(props):
    fixed, dropped = salvage_properties(props)
    assert properties_error(fixed) is None
    if properties_error(props) is None:
        assert fixed is props and dropped is None
    else:
        assert dropped


def test_salvage_replaces_a_bad_headers_table_and_keeps_the_properties_around_it():
    props = BasicProperties(content_type="text/plain", headers={"k": 1}, delivery_mode=2, message_id="m-1").encode()
    start = props.index(b"\x01kI")
    poisoned = props[:start + 2] + b"Z" + props[start + 3:]  # same length, unknown type letter
    fixed, dropped = salvage_properties(poisoned)
    decoded, _ = BasicProperties.decode(fixed, 0)
    assert (decoded.content_type, decoded.headers, decoded.delivery_mode, decoded.message_id) == \
        ("text/plain", {}, 2, "m-1")
    assert "headers" in dropped


def test_salvage_keeps_what_precedes_a_property_cut_short():
    fixed, dropped = salvage_properties(b"\x90\x00\x03abc")  # content-type, then delivery-mode missing
    decoded, _ = BasicProperties.decode(fixed, 0)
    assert decoded.content_type == "abc" and decoded.delivery_mode is None
    assert "delivery-mode" in dropped


def test_a_table_of_any_encodable_headers_passes():
    headers = {"x-death": [{"count": 1, "time": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)}],
               "nested": {"a": [1, "two", None, b"\x00"]}}
    assert properties_error(b"\x20\x00" + encode_table(headers)) is None
