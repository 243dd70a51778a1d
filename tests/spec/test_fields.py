"""Field-table codec (warren.spec.fields): round trips, decode-only types, malformed input.

INVENTORY.md §5.2: we emit ``t I l d D S T F A x V`` and also decode ``b B U u s i L f``,
with ``s`` a signed 16-bit integer and ``l``/``L`` signed 64-bit (RabbitMQ/Qpid, not the grammar).
"""

from __future__ import annotations

import datetime
import decimal
import math
import struct

import pytest
from hypothesis import given, settings, strategies as st

from warren.spec.fields import (
    MAX_TABLE_DEPTH, TIMESTAMP_MAX, FieldDecodeError, FieldTruncated, TableValueError, decode_array,
    decode_longstr, decode_shortstr, decode_table, decode_value, encode_array, encode_longstr, encode_shortstr,
    encode_table, encode_value,
)

UTC = datetime.timezone.utc
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# --- strategies ------------------------------------------------------------------------------

# Text as it comes off the wire: any octets, decoded with surrogateescape. Such a string encodes
# back to exactly those octets (a str made of arbitrary code points may not: lone surrogates).
wire_text = st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape"))
plain_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
text = st.one_of(wire_text, plain_text)


field_names = st.one_of(st.text("abcxyz-_.", max_size=8), text)  # at most 80 octets: a valid shortstr

decimals = st.builds(lambda value, scale: decimal.Decimal(value).scaleb(-scale),
                     st.integers(I32_MIN, I32_MAX), st.integers(0, 255))
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
MAX_SECONDS = int((datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - EPOCH).total_seconds())
timestamps = st.integers(0, MAX_SECONDS).map(lambda secs: EPOCH + datetime.timedelta(seconds=secs))
scalars = st.one_of(
    text,
    st.booleans(),
    st.integers(I64_MIN, I64_MAX),
    st.floats(allow_nan=False),
    decimals,
    timestamps,
    st.binary(max_size=40),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(field_names, children, max_size=5),
    ),
    max_leaves=10,
)
tables = st.dictionaries(field_names, values, max_size=5)


def same(a, b) -> bool:
    """Equality that also insists on the Python type (True == 1 and 1 == 1.0 are not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return struct.pack(">d", a) == struct.pack(">d", b)  # -0.0 stays -0.0
    if isinstance(a, decimal.Decimal):
        return a.as_tuple() == b.as_tuple()  # scale is kept, not only the value
    return a == b


def roundtrip_value(v):
    data = encode_value(v)
    out, off = decode_value(data, 0)
    assert off == len(data)
    return out


# --- round trips of what we emit -------------------------------------------------------------

@settings(max_examples=200)
@given(tables)
def test_any_table_of_emittable_values_survives_a_round_trip(table):
    data = encode_table(table)
    out, off = decode_table(data, 0)
    assert off == len(data)
    assert same(out, table)


@settings(max_examples=50)
@given(tables, st.binary(max_size=8), st.binary(max_size=8))
def test_a_table_decodes_at_an_offset_and_stops_at_its_own_end(table, before, after):
    data = before + encode_table(table) + after
    out, off = decode_table(memoryview(data), len(before))
    assert off == len(data) - len(after)
    assert same(out, table)


@settings(max_examples=100)
@given(st.lists(values, max_size=6))
def test_any_array_survives_a_round_trip(items):
    data = encode_array(items)
    out, off = decode_array(data, 0)
    assert off == len(data)
    assert same(out, items)


@given(st.binary(max_size=300))
def test_a_string_of_arbitrary_octets_round_trips_through_surrogateescape(raw):
    s = raw.decode("utf-8", "surrogateescape")
    data = encode_value(s)
    assert data == b"S" + struct.pack(">I", len(raw)) + raw
    assert roundtrip_value(s) == s
    assert roundtrip_value(s).encode("utf-8", "surrogateescape") == raw


@given(st.booleans())
def test_a_boolean_is_sent_as_t_and_comes_back_a_bool(b):
    assert encode_value(b) == (b"t\x01" if b else b"t\x00")
    assert roundtrip_value(b) is b


def test_any_non_zero_t_octet_is_true():
    assert decode_value(b"t\x02", 0) == (True, 2)
    assert decode_value(b"t\xff", 0) == (True, 2)


@given(st.integers(I64_MIN, I64_MAX))
def test_an_integer_in_the_signed_64_bit_range_round_trips(n):
    out = roundtrip_value(n)
    assert type(out) is int and out == n


@given(st.integers(I32_MIN, I32_MAX))
def test_an_integer_that_fits_32_bits_is_sent_as_signed_32_I(n):
    assert encode_value(n) == b"I" + struct.pack(">i", n)


@given(st.one_of(st.integers(I64_MIN, I32_MIN - 1), st.integers(I32_MAX + 1, I64_MAX)))
def test_a_wider_integer_is_sent_as_signed_64_l(n):
    assert encode_value(n) == b"l" + struct.pack(">q", n)


@pytest.mark.parametrize("n", [I64_MIN - 1, I64_MAX + 1, 2**100, -(2**100)])
def test_an_integer_beyond_64_bits_refuses_to_encode(n):
    with pytest.raises(TableValueError):
        encode_value(n)


@given(st.floats())
def test_a_float_is_sent_as_a_double_bit_for_bit(x):
    data = encode_value(x)
    assert data == b"d" + struct.pack(">d", x)
    out = roundtrip_value(x)
    assert type(out) is float
    assert struct.pack(">d", out) == struct.pack(">d", x)  # NaN and -0.0 included


@given(st.integers(I32_MIN, I32_MAX), st.integers(0, 255))
def test_a_decimal_round_trips_with_its_scale(value, scale):
    d = decimal.Decimal(value).scaleb(-scale)
    data = encode_value(d)
    assert data == b"D" + struct.pack(">Bi", scale, value)
    out = roundtrip_value(d)
    assert out == d and out.as_tuple() == d.as_tuple()


@pytest.mark.parametrize("text_value,scale,unscaled", [
    ("1.5", 1, 15), ("-1.5", 1, -15), ("0", 0, 0), ("-0.00", 2, 0), ("1E+3", 0, 1000),
    ("2147483647", 0, I32_MAX), ("-2147483648", 0, I32_MIN), ("0.001", 3, 1),
])
def test_a_decimal_is_encoded_as_scale_and_signed_value(text_value, scale, unscaled):
    assert encode_value(decimal.Decimal(text_value)) == b"D" + struct.pack(">Bi", scale, unscaled)


@pytest.mark.parametrize("text_value", ["2147483648", "-2147483649", "1E+10", "1E-256", "NaN", "Infinity"])
def test_a_decimal_that_does_not_fit_refuses_to_encode(text_value):
    with pytest.raises(TableValueError):
        encode_value(decimal.Decimal(text_value))


def test_the_decimal_value_is_decoded_as_signed():
    out, off = decode_value(b"D\x02\xff\xff\xff\xfe", 0)
    assert (out, off) == (decimal.Decimal("-0.02"), 6)


@settings(max_examples=200)
@given(timestamps)
def test_a_utc_datetime_in_whole_seconds_round_trips(dt):
    out = roundtrip_value(dt)
    assert out == dt and out.tzinfo is not None and out.utcoffset() == datetime.timedelta(0)


def test_a_datetime_is_sent_as_posix_seconds():
    dt = datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert encode_value(dt) == b"T" + struct.pack(">Q", int(dt.timestamp()))


def test_a_naive_datetime_is_taken_as_utc():
    naive = datetime.datetime(2001, 9, 9, 1, 46, 40)
    assert encode_value(naive) == b"T" + struct.pack(">Q", 1_000_000_000)


def test_a_datetime_in_another_zone_is_converted_to_utc_seconds():
    cet = datetime.timezone(datetime.timedelta(hours=1))
    dt = datetime.datetime(2001, 9, 9, 2, 46, 40, tzinfo=cet)
    assert encode_value(dt) == b"T" + struct.pack(">Q", 1_000_000_000)


@given(st.binary(max_size=300))
def test_bytes_are_sent_as_a_byte_array_x_and_come_back_as_bytes(b):
    assert encode_value(b) == b"x" + struct.pack(">I", len(b)) + b
    out = roundtrip_value(b)
    assert type(out) is bytes and out == b


def test_bytearray_and_memoryview_are_sent_as_byte_arrays_too():
    assert encode_value(bytearray(b"ab")) == b"x\x00\x00\x00\x02ab"
    assert encode_value(memoryview(b"ab")) == b"x\x00\x00\x00\x02ab"


def test_none_is_sent_as_void():
    assert encode_value(None) == b"V"
    assert decode_value(b"V", 0) == (None, 1)


def test_a_tuple_is_sent_as_an_array_and_comes_back_as_a_list():
    assert roundtrip_value((1, "a")) == [1, "a"]


def test_nested_tables_and_arrays_round_trip():
    v = {"a": [1, {"b": [None, True, b"\x00"]}, []], "c": {}}
    assert same(roundtrip_value(v), v)


def test_an_empty_or_missing_table_is_four_zero_octets():
    assert encode_table({}) == b"\x00\x00\x00\x00"
    assert encode_table(None) == b"\x00\x00\x00\x00"
    assert decode_table(b"\x00\x00\x00\x00", 0) == ({}, 4)


def test_the_array_length_is_a_byte_count_not_an_element_count():
    data = encode_array([1, 2])
    assert data == b"\x00\x00\x00\x0a" + b"I\x00\x00\x00\x01" + b"I\x00\x00\x00\x02"


def test_a_table_encodes_as_length_then_name_tag_value_pairs():
    assert encode_table({"k": 1}) == b"\x00\x00\x00\x07" + b"\x01k" + b"I\x00\x00\x00\x01"


@pytest.mark.parametrize("value", [object(), 1j, {1, 2}, frozenset()])
def test_a_value_of_another_type_refuses_to_encode(value):
    with pytest.raises(TableValueError):
        encode_value(value)


def test_the_first_of_duplicate_field_names_wins():
    body = b"\x01a" + b"I\x00\x00\x00\x01" + b"\x01a" + b"I\x00\x00\x00\x02"
    table, off = decode_table(struct.pack(">I", len(body)) + body, 0)
    assert table == {"a": 1} and off == 4 + len(body)


# --- types we only decode --------------------------------------------------------------------

@pytest.mark.parametrize("data,expected", [
    (b"b\x7f", 127),
    (b"b\x80", -128),
    (b"b\xff", -1),
    (b"B\xff", 255),
    (b"B\x00", 0),
    (b"U\xff\xfe", -2),
    (b"U\x7f\xff", 32767),
    (b"u\xff\xfe", 65534),
    (b"s\xff\xfe", -2),  # signed 16 (RabbitMQ/Qpid), not a short string
    (b"s\x80\x00", -32768),
    (b"s\x00\x03", 3),
    (b"i\xff\xff\xff\xff", 2**32 - 1),
    (b"I\xff\xff\xff\xff", -1),
    (b"L\xff\xff\xff\xff\xff\xff\xff\xff", -1),
    (b"L\x7f\xff\xff\xff\xff\xff\xff\xff", I64_MAX),
    (b"l\xff\xff\xff\xff\xff\xff\xff\xff", -1),  # signed 64, not unsigned as in the grammar
    (b"l\x80\x00\x00\x00\x00\x00\x00\x00", I64_MIN),
    (b"f\x3f\xc0\x00\x00", 1.5),
    (b"f\xc0\x20\x00\x00", -2.5),
], ids=lambda v: v.hex() if isinstance(v, bytes) else repr(v))
def test_a_decode_only_type_decodes_to_its_value(data, expected):
    value, off = decode_value(data, 0)
    assert value == expected and type(value) is type(expected)
    assert off == len(data)


def test_an_s_value_consumes_exactly_two_octets_inside_a_table():
    body = b"\x01a" + b"s\x00\x05" + b"\x01b" + b"I\x00\x00\x00\x07"
    assert decode_table(struct.pack(">I", len(body)) + body, 0) == ({"a": 5, "b": 7}, 4 + len(body))


def test_an_f_value_is_a_single_precision_float():
    value, off = decode_value(b"f" + struct.pack(">f", 0.1), 0)
    assert off == 5 and value == struct.unpack(">f", struct.pack(">f", 0.1))[0]
    nan, _ = decode_value(b"f\x7f\xc0\x00\x00", 0)
    assert math.isnan(nan)


def test_a_string_with_invalid_utf8_decodes_with_surrogateescape():
    value, off = decode_value(b"S\x00\x00\x00\x02\xff\xfe", 0)
    assert value == "\udcff\udcfe" and off == 7


def test_a_long_string_method_argument_stays_bytes():
    assert decode_longstr(b"\x00\x00\x00\x02\xff\x00", 0) == (b"\xff\x00", 6)
    assert encode_longstr("é") == b"\x00\x00\x00\x02\xc3\xa9"
    assert encode_longstr(bytearray(b"ab")) == b"\x00\x00\x00\x02ab"


def test_a_timestamp_past_the_year_9999_is_a_decode_error_not_an_overflow():
    # pika turns a T value into a datetime: past 9999 it cannot, and its connection dies
    with pytest.raises(FieldDecodeError, match="9999"):
        decode_value(b"T\xff\xff\xff\xff\xff\xff\xff\xff", 0)
    with pytest.raises(FieldDecodeError):
        decode_value(b"T" + struct.pack(">Q", TIMESTAMP_MAX + 1), 0)
    last, _ = decode_value(b"T" + struct.pack(">Q", TIMESTAMP_MAX), 0)
    assert last == datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


# --- shortstr ---------------------------------------------------------------------------------

@given(st.binary(max_size=255))
def test_a_shortstr_of_up_to_255_octets_round_trips(raw):
    s = raw.decode("utf-8", "surrogateescape")
    data = encode_shortstr(s)
    assert data == bytes([len(raw)]) + raw
    assert decode_shortstr(data, 0) == (s, len(data))
    assert encode_shortstr(raw) == data


@pytest.mark.parametrize("s", ["x" * 256, "é" * 128, b"\x00" * 256])
def test_a_shortstr_over_255_octets_refuses_to_encode(s):
    with pytest.raises(TableValueError):
        encode_shortstr(s)


def test_a_field_name_over_255_octets_refuses_to_encode():
    with pytest.raises(TableValueError):
        encode_table({"n" * 256: 1})


def test_a_shortstr_or_longstr_that_runs_past_the_buffer_is_truncated():
    for fn, data in ((decode_shortstr, b"\x05abc"), (decode_shortstr, b""), (decode_longstr, b"\x00\x00"),
                     (decode_longstr, b"\x00\x00\x00\x09abc")):
        with pytest.raises(FieldTruncated):
            fn(data, 0)


# --- malformed input --------------------------------------------------------------------------

DECODE_FAILURES = FieldDecodeError  # the only error a decoder raises (fields.py docstring)


@settings(max_examples=100)
@given(tables.filter(bool), st.data())
def test_every_truncation_of_a_table_fails_to_decode(table, data):
    encoded = encode_table(table)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(DECODE_FAILURES):
        decode_table(encoded[:cut], 0)


@pytest.mark.parametrize("data", [
    b"",
    b"\x00\x00",  # length cut short
    b"\x00\x00\x00\x05\x01a",  # length beyond the buffer
    b"\x00\x00\x00\x03\x01aI\x00\x00\x00\x01",  # entries overrun the table length
    b"\x00\x00\x00\x07\x01aI\x00\x00",  # value cut short
    b"\x00\x00\x00\x03\x01aZ",  # unknown tag
    b"\x00\x00\x00\x08\x01aS\x00\x00\x00\xff",  # string longer than the buffer
    b"\x00\x00\x00\x03\x05abc",  # field name longer than the table
    b"\x00\x00\x00\x0b\x01aF\x00\x00\x00\x09\x01b",  # nested table beyond the buffer
], ids=lambda d: d.hex() or "empty")
def test_a_malformed_table_raises_a_decode_failure(data):
    with pytest.raises(DECODE_FAILURES):
        decode_table(data, 0)


@pytest.mark.parametrize("data", [
    b"\x00\x00\x00\x02I\x00",  # value cut by the array length, then overrun
    b"\x00\x00\x00\x09I\x00\x00\x00\x01",  # array length beyond the buffer
    b"\x00\x00\x00\x01?",  # unknown tag
], ids=lambda d: d.hex())
def test_a_malformed_array_raises_a_decode_failure(data):
    with pytest.raises(DECODE_FAILURES):
        decode_array(data, 0)


def test_every_unknown_tag_raises_table_value_error():
    unknown = sorted(set(range(256)) - set(b"tbBUusIiLlfdDSTFAxV"))
    assert len(unknown) == 256 - 19
    for tag in unknown:
        with pytest.raises(TableValueError):
            decode_value(bytes([tag]) + b"\x00" * 8, 0)


@pytest.mark.parametrize("tag", list("tbBUusIiLlfdDSTFAx"))
def test_every_known_tag_with_no_value_octets_fails(tag):
    with pytest.raises(DECODE_FAILURES):
        decode_value(tag.encode(), 0)


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_random_octets_decode_or_raise_only_decode_failures(data):
    try:
        decode_table(data, 0)
    except DECODE_FAILURES:
        pass


def test_long_is_always_encoded_as_a_signed_64_bit_l():
    from warren.spec.fields import Long
    assert encode_value(Long(1)) == b"l" + struct.pack(">q", 1)
    assert encode_value(Long(-5)) == b"l" + struct.pack(">q", -5)
    assert encode_value(1) == b"I" + struct.pack(">i", 1)


def test_a_raw_value_is_written_back_as_it_came():
    from warren.spec.fields import RawValue
    raw = b"b\xfe"  # an int8 that a Python int would re-encode as I
    assert encode_table({"k": RawValue(raw)}) == struct.pack(">I", 4) + b"\x01k" + raw


# --- hostile input (issue 16): bounded nesting, bounded reads, one error type ----------------------

def nested_table(depth: int) -> bytes:
    """A table nested ``depth`` deep (the outermost counts as 1), built in linear time: each
    level is its length and the entry ``a`` of type F, the innermost an empty table."""
    prefixes = []
    size = 4  # the innermost table, its length included
    for _ in range(depth - 1):
        prefixes.append(struct.pack(">I", 3 + size) + b"\x01aF")
        size += 7
    return b"".join(reversed(prefixes)) + b"\x00\x00\x00\x00"


def nested_array(depth: int) -> bytes:
    inner = b"\x00\x00\x00\x00"
    for _ in range(depth - 1):
        item = b"A" + inner
        inner = struct.pack(">I", len(item)) + item
    return inner


def test_tables_nested_max_table_depth_deep_decode():
    table, end = decode_table(nested_table(MAX_TABLE_DEPTH), 0)
    depth = 1
    while table:
        table = table["a"]
        depth += 1
    assert depth == MAX_TABLE_DEPTH and MAX_TABLE_DEPTH == 100


@pytest.mark.parametrize("depth", [MAX_TABLE_DEPTH + 1, 5000, 100_000])
def test_deeper_tables_are_a_decode_error_not_a_recursion_error(depth):
    with pytest.raises(FieldDecodeError, match="nested more than 100 deep") as ei:
        decode_table(nested_table(depth), 0)
    assert not isinstance(ei.value, FieldTruncated)


def test_arrays_count_towards_the_nesting_depth():
    decode_array(nested_array(MAX_TABLE_DEPTH), 0)
    with pytest.raises(FieldDecodeError, match="deep"):
        decode_array(nested_array(MAX_TABLE_DEPTH + 1), 0)
    # tables and arrays alternating, 101 levels, the outermost a table
    body, tag = b"", b"F"  # the innermost: an empty table
    for level in range(MAX_TABLE_DEPTH):
        child = tag + struct.pack(">I", len(body)) + body
        if level % 2:  # this level is a table holding the child under "k"
            body, tag = b"\x01k" + child, b"F"
        else:  # an array holding the child
            body, tag = child, b"A"
    entry = b"\x01k" + tag + struct.pack(">I", len(body)) + body  # 101 levels under the outermost table
    with pytest.raises(FieldDecodeError, match="deep"):
        decode_table(struct.pack(">I", len(entry)) + entry, 0)


def test_a_table_running_past_the_buffer_is_truncated_but_a_bad_entry_inside_it_is_not():
    with pytest.raises(FieldTruncated):
        decode_table(b"\x00\x00\x00\x09\x01aI\x00", 0)
    with pytest.raises(FieldTruncated):
        decode_table(b"\x00\x00", 0)
    # the value needs 4 octets, its table holds 2 more: malformed, whatever follows the table
    for after in (b"", b"\x00\x00\x00\x00\x00\x00"):
        with pytest.raises(FieldDecodeError) as ei:
            decode_table(b"\x00\x00\x00\x05\x01aI\x00\x00" + after, 0)
        assert not isinstance(ei.value, FieldTruncated)


def test_a_value_never_reads_the_octets_after_its_table():
    # the S length (3) fits the buffer but not the table: the next octets are not the string's
    data = b"\x00\x00\x00\x07\x01aS\x00\x00\x00\x03" + b"xyz"
    with pytest.raises(FieldDecodeError, match="past the end of its table"):
        decode_table(data, 0)
    with pytest.raises(FieldDecodeError):
        decode_array(b"\x00\x00\x00\x05S\x00\x00\x00\x01" + b"z", 0)


def test_decode_value_with_an_end_bounds_the_value():
    data = b"I\x00\x00\x00\x01"
    assert decode_value(data, 0) == (1, 5)
    with pytest.raises(FieldDecodeError) as ei:
        decode_value(data, 0, 3)
    assert not isinstance(ei.value, FieldTruncated)
    with pytest.raises(FieldTruncated):
        decode_value(data[:3], 0)


def mutations(encoded: bytes):
    """Octet strings near a valid encoding: cut, extended, flipped, spliced."""
    n = len(encoded)
    return st.one_of(
        st.integers(0, n).map(lambda i: encoded[:i]),
        st.binary(min_size=1, max_size=8).map(lambda extra: encoded + extra),
        st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(
            lambda t: encoded[:t[0]] + bytes([t[1]]) + encoded[t[0] + 1:] if n else bytes([t[1]])),
        st.tuples(st.integers(0, n), st.binary(max_size=6)).map(lambda t: encoded[:t[0]] + t[1] + encoded[t[0]:]),
        st.tuples(st.integers(0, n), st.integers(0, 6)).map(lambda t: encoded[:t[0]] + encoded[t[0] + t[1]:]),
    )


hostile_tables = tables.map(encode_table).flatmap(mutations)


@settings(max_examples=200)
@given(st.one_of(hostile_tables, st.binary(max_size=80)), st.sampled_from([bytes, bytearray, memoryview]))
def test_decode_table_of_hostile_octets_returns_or_raises_only_field_decode_error(data, kind):
    buf = kind(data)
    try:
        table, end = decode_table(buf, 0)
    except FieldDecodeError:
        return
    assert 4 <= end <= len(data)
    assert isinstance(table, dict)


@settings(max_examples=300)
@given(st.one_of(values.map(encode_value).flatmap(mutations), st.binary(max_size=40)))
def test_decode_value_and_array_of_hostile_octets_raise_only_field_decode_error(data):
    for fn in (decode_value, decode_array):
        try:
            _, end = fn(data, 0)
        except FieldDecodeError:
            continue
        assert end <= len(data)


@settings(max_examples=100)
@given(tables, st.binary(max_size=16))
def test_a_valid_table_decodes_the_same_whatever_follows_it(table, after):
    encoded = encode_table(table)
    got, end = decode_table(encoded + after, 0)
    assert end == len(encoded) and same(got, decode_table(encoded, 0)[0])
