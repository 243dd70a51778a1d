"""The AMQP 1.0 type system: every primitive round-trips, the smallest forms are chosen, and any
malformed octets raise DecodeError (never another exception)."""

import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from warren.codec.amqp1_0 import types as t
from warren.spec import amqp1_0 as spec


def ints(cls, lo, hi):
    return st.integers(lo, hi).map(cls)


scalars = st.one_of(
    st.none(), st.booleans(),
    ints(t.UByte, 0, 255), ints(t.UShort, 0, 0xFFFF), ints(t.UInt, 0, 0xFFFFFFFF), ints(t.ULong, 0, (1 << 64) - 1),
    ints(t.Byte, -128, 127), ints(t.Short, -(1 << 15), (1 << 15) - 1), ints(t.Int, -(1 << 31), (1 << 31) - 1),
    ints(t.Long, -(1 << 63), (1 << 63) - 1), ints(t.Timestamp, -(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False, width=32).map(t.Float), st.floats(allow_nan=False),
    st.binary(min_size=4, max_size=4).map(t.Decimal32), st.binary(min_size=8, max_size=8).map(t.Decimal64),
    st.binary(min_size=16, max_size=16).map(t.Decimal128),
    st.characters(blacklist_categories=("Cs",)).map(t.Char), st.uuids(),
    st.binary(max_size=300), st.text(max_size=300).filter(lambda s: "\ud800" > s or True),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=300).map(t.Symbol),
)
hashable = st.one_of(st.text(max_size=20), st.text(alphabet="abcxyz-:", max_size=20).map(t.Symbol),
                     ints(t.ULong, 0, 1 << 40), st.integers(-1000, 1000).map(t.Long))


def arrays(kind, elements):
    return st.lists(elements, max_size=20).map(lambda xs: t.Array(xs, kind))


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=8),
        st.dictionaries(hashable, inner, max_size=6),
        arrays("uint", ints(t.UInt, 0, 0xFFFFFFFF)), arrays("long", ints(t.Long, -(1 << 63), (1 << 63) - 1)),
        arrays("symbol", st.text(alphabet="abc:-", max_size=300).map(t.Symbol)), arrays("string", st.text(max_size=5)),
        arrays("boolean", st.booleans()), arrays("binary", st.binary(max_size=3)), arrays("uuid", st.uuids()),
        arrays("list", st.lists(inner, max_size=3)),
    ),
    max_leaves=30,
)


def same(a, b) -> bool:
    """Equal, and of the same Python type at every level (so a UInt stays a UInt)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(same(k1, k2) and same(a[k1], b[k2]) for k1, k2 in zip(a, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)) and getattr(a, "type", 0) == getattr(b, "type", 0)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@settings(max_examples=400, deadline=None)
@given(values)
def test_every_value_round_trips_with_its_type(value):
    assert same(t.decode(t.encode(value)), value)


@settings(max_examples=300, deadline=None)
@given(values)
def test_a_value_decodes_from_inside_a_longer_buffer_and_byte_by_byte_prefixes_fail_cleanly(value):
    data = t.encode(value)
    got, off = t.decode_value(b"\xff" + data + b"\x41", 1)
    assert same(got, value) and off == 1 + len(data)
    for cut in range(len(data)):
        with pytest.raises(t.DecodeError):
            t.decode(data[:cut])


@pytest.mark.parametrize("value, octets", [
    (None, b"\x40"), (True, b"\x41"), (False, b"\x42"),
    (t.UInt(0), b"\x43"), (t.UInt(7), b"\x52\x07"), (t.UInt(256), b"\x70\x00\x00\x01\x00"),
    (t.ULong(0), b"\x44"), (t.ULong(255), b"\x53\xff"), (t.ULong(256), b"\x80" + (256).to_bytes(8, "big")),
    (t.Int(-1), b"\x54\xff"), (t.Int(1000), b"\x71\x00\x00\x03\xe8"), (t.Long(-2), b"\x55\xfe"),
    (5, b"\x55\x05"), (1 << 63, b"\x80\x80" + bytes(7)),
    (t.UByte(9), b"\x50\x09"), (t.UShort(9), b"\x60\x00\x09"), (t.Byte(-1), b"\x51\xff"), (t.Short(-1), b"\x61\xff\xff"),
    (t.Char("é"), b"\x73\x00\x00\x00\xe9"), (t.Timestamp(1), b"\x83" + (1).to_bytes(8, "big")),
    (b"ab", b"\xa0\x02ab"), ("ab", b"\xa1\x02ab"), (t.Symbol("ab"), b"\xa3\x02ab"),
    (b"x" * 256, b"\xb0\x00\x00\x01\x00" + b"x" * 256), ("", b"\xa1\x00"),
    ([], b"\x45"), ([True], b"\xc0\x02\x01\x41"), ({"a": None}, b"\xc1\x05\x02\xa1\x01a\x40"),
    (t.Array([t.UInt(1), t.UInt(2)], "uint"), b"\xe0\x0a\x02\x70" + (1).to_bytes(4, "big") + (2).to_bytes(4, "big")),
    (t.Array([t.Symbol("a")], "symbol"), b"\xe0\x04\x01\xa3\x01a"),
    (uuid.UUID(int=1), b"\x98" + (1).to_bytes(16, "big")),
])
def test_smallest_encodings_of_part_1_section_1_6(value, octets):
    assert t.encode(value) == octets
    assert same(t.decode(octets), value) or type(value) is int


def test_the_wide_forms_decode_too():
    assert t.decode(b"\x56\x01") is True and t.decode(b"\x56\x00") is False
    assert t.decode(b"\xd0\x00\x00\x00\x05\x00\x00\x00\x01\x43") == [0]
    assert t.decode(b"\xd1\x00\x00\x00\x04\x00\x00\x00\x00") == {}
    assert t.decode(b"\xb3\x00\x00\x00\x01a") == "a"
    assert t.decode(b"\xf0\x00\x00\x00\x05\x00\x00\x00\x00\x43") == t.Array([], "uint")


def test_composites_encode_as_described_lists_without_trailing_nulls_and_decode_to_their_class():
    begin = spec.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=2)
    octets = t.encode(begin)
    assert octets == b"\x00\x53\x11\xc0\x07\x04\x40\x43\x52\x64\x52\x02"
    back = t.decode(octets)
    assert type(back) is spec.Begin and back == begin and back.handle_max == 4294967295
    # symbolic descriptors name the same class
    assert type(t.decode(b"\x00\xa3\x0damqp:end:list\x45")) is spec.End
    # multiple fields: a list is sent as an array of the field's primitive, a single value as is
    mech = t.encode(spec.SaslMechanisms(sasl_server_mechanisms=["PLAIN", "ANONYMOUS"]))
    assert t.decode(mech).sasl_server_mechanisms == t.Array(["PLAIN", "ANONYMOUS"], "symbol")
    # fields maps get symbol keys; an unknown descriptor stays Described
    opened = t.decode(t.encode(spec.Open(container_id="c", properties={"product": "warren"})))
    assert list(opened.properties) == ["product"] and type(next(iter(opened.properties))) is t.Symbol
    assert t.decode(t.encode(t.Described(t.Symbol("x:y"), 5))) == t.Described(t.Symbol("x:y"), 5)


@pytest.mark.parametrize("octets, reason", [
    (b"", "missing"), (b"\x57", "unknown format code"), (b"\xa5\x00", "unknown format code"),
    (b"\x70\x00\x00", "past the end"), (b"\xa1\x05ab", "past the end"), (b"\xb0\xff\xff\xff\xff", "past the end"),
    (b"\xa1\x02\xc3\x28", "not UTF-8"), (b"\xa3\x01\xff", "not ASCII"), (b"\x56\x02", "neither 0 nor 1"),
    (b"\x73\x00\x00\xd8\x00", "not a Unicode scalar"),
    (b"\xc0\x01\x05", "count 5 exceeds"), (b"\xc0\x00\x00", "smaller than its count"),
    (b"\xc0\x03\x01\x41\x41", "left over"), (b"\xc1\x02\x01\x41", "odd count"),
    (b"\xc1\x05\x04\x41\x40\x41\x40", "twice"), (b"\xc1\x03\x02\x45\x40", "not supported"),
    (b"\xe0\x01\x01", "without an element constructor"), (b"\xe0\x03\x05\x70\x00", "exceeds"),
    (b"\xe0\x02\x01\x99", "unknown array element"), (b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40", "zero-width"),
    (b"\x00\x53\x10\x45", "mandatory field container-id"), (b"\x00\x53\x17\x42", "not described as a list"),
    (b"\x00\x53\x18\xc0\x03\x02\x40\x40", "at most 1"), (b"\xc0\x40\x01" + b"\xc0\x3d\x01" * 40, "past the end"),
    (b"\x00" * 40 + b"\x40", "nested deeper"), (b"\xc0\x02\x01\x41\x41", "octets after"),
])
def test_malformed_octets_raise_decode_error_with_a_reason(octets, reason):
    with pytest.raises(t.DecodeError, match=reason):
        t.decode(octets)


def test_nesting_deeper_than_the_limit_is_refused():
    deep = b"\x45"
    for _ in range(t.MAX_DEPTH + 1):
        deep = b"\xc0" + bytes((len(deep) + 1, 1)) + deep if len(deep) < 250 else b"\xd0" + (len(deep) + 4).to_bytes(4, "big") + (1).to_bytes(4, "big") + deep
    with pytest.raises(t.DecodeError, match="nested deeper"):
        t.decode(deep)


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=64))
def test_any_octets_decode_or_raise_decode_error(data):
    try:
        t.decode(data)
    except t.DecodeError:
        pass


@pytest.mark.parametrize("octets, reason", [
    (t.encode(t.Described(t.ULong(0x12), ["l", "not a handle", False])), "field handle holds a str"),
    (t.encode(t.Described(t.ULong(0x13), [None, True, t.UInt(0), t.UInt(0)])), "field incoming-window holds a bool"),
    (t.encode(t.Described(t.ULong(0x10), ["c", None, None, None, None, None, None, [1]])), "offered-capabilities"),
])
def test_a_composite_field_of_the_wrong_type_is_a_decode_error(octets, reason):
    with pytest.raises(t.DecodeError, match=reason):
        t.decode(octets)
