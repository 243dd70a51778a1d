"""BULK FORMAT -> Arrow: the vectorised parser against a reference encoder written here, the
property decoding and rendering, and the Arrow schema Spark expects."""

from __future__ import annotations

import datetime
import decimal
import struct
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from warren.broker.queues.stream_header import with_stream_offset
from warren.spark.read import properties
from warren.spark.read.records import ARROW_SCHEMA, FULL_ARROW_SCHEMA, arrow_schema, entry_positions, parse_bulk
from warren.spark.schema import COLUMNS
from warren.spec.amqp0_9_1 import BasicProperties


def ref_entry(offset: int, timestamp_ms: int, record: bytes) -> bytes:
    """The BULK FORMAT entry, as docs/streams.md describes it."""
    covered = struct.pack(">QqI", offset, timestamp_ms, len(record)) + record
    return struct.pack(">I", zlib.crc32(covered)) + covered


def ref_record(exchange: bytes, routing_key: bytes, props: bytes, body: bytes) -> bytes:
    return bytes([len(exchange)]) + exchange + bytes([len(routing_key)]) + routing_key + \
        struct.pack(">I", len(props)) + props + body


names = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)
header_values = st.one_of(st.integers(-2**31, 2**31 - 1), st.booleans(), st.text(max_size=30))
messages = st.fixed_dictionaries({
    "exchange": names,
    "routing_key": names,
    "body": st.binary(max_size=64),
    "content_type": st.one_of(st.none(), st.sampled_from(["text/plain", "application/json"])),
    "delivery_mode": st.one_of(st.none(), st.integers(1, 2)),
    "priority": st.one_of(st.none(), st.integers(0, 9)),
    "message_id": st.one_of(st.none(), st.text(max_size=20)),
    "timestamp": st.one_of(st.none(), st.integers(0, 2**33)),
    "headers": st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=10), header_values, max_size=4)),
})


def render(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def expected(m: dict, offset: int, stream: str, stored_ms: int) -> dict:
    headers = [(k, render(v)) for k, v in m["headers"].items()] if m["headers"] else None
    ts = m["timestamp"]
    return {
        "body": m["body"], "routing_key": m["routing_key"], "exchange": m["exchange"], "offset": offset,
        "stream": stream, "timestamp": datetime.datetime.fromtimestamp(stored_ms / 1000, datetime.timezone.utc),
        "message_id": m["message_id"], "content_type": m["content_type"], "headers": headers,
        "properties": {
            "content_type": m["content_type"], "content_encoding": None, "delivery_mode": m["delivery_mode"],
            "priority": m["priority"], "correlation_id": None, "reply_to": None, "expiration": None,
            "message_id": m["message_id"],
            "timestamp": None if ts is None else datetime.datetime.fromtimestamp(ts, datetime.timezone.utc),
            "type": None, "user_id": None, "app_id": None,
        },
        "property_list": _properties(m),  # the list as encoded, octet for octet
    }


def _properties(m: dict) -> bytes:
    return BasicProperties(content_type=m["content_type"], delivery_mode=m["delivery_mode"], priority=m["priority"],
                           message_id=m["message_id"], timestamp=m["timestamp"], headers=m["headers"]).encode()


def encode(m: dict) -> bytes:
    return ref_record(m["exchange"].encode(), m["routing_key"].encode(), _properties(m), m["body"])


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=30), st.integers(0, 2**40), st.booleans())
def test_parse_round_trips_against_the_reference_encoder(msgs, first, verify):
    data = b"".join(ref_entry(first + i, 1_700_000_000_000 + i, encode(m)) for i, m in enumerate(msgs))
    batch = parse_bulk(data, "events", verify=verify, schema=FULL_ARROW_SCHEMA)
    assert batch.schema == FULL_ARROW_SCHEMA
    rows = [expected(m, first + i, "events", 1_700_000_000_000 + i) for i, m in enumerate(msgs)]
    assert _plain(batch.to_pylist()) == rows
    # the default schema is the flat columns, the same values
    flat = parse_bulk(data, "events", verify=verify)
    assert flat.schema == ARROW_SCHEMA
    assert _plain(flat.to_pylist()) == [{k: r[k] for k in ARROW_SCHEMA.names} for r in rows]


def _plain(rows: list) -> list:
    """Arrow's UTC datetimes (zoneinfo) as datetime.timezone.utc ones, to compare with =="""
    return [{k: (v.astimezone(datetime.timezone.utc) if isinstance(v, datetime.datetime) else v)
             for k, v in r.items()} for r in rows]


@settings(max_examples=60, deadline=None)
@given(st.lists(messages, min_size=1, max_size=20), st.permutations(COLUMNS), st.integers(1, len(COLUMNS)),
       st.booleans())
def test_any_projection_gives_the_full_rows_columns(msgs, order, keep, same_props):
    """A read schema naming some columns in any order builds exactly those, with the values the
    full schema has (whichever way the property lists are decoded)."""
    if same_props:
        msgs = [{**m, **{k: msgs[0][k] for k in ("content_type", "delivery_mode", "priority", "message_id",
                                                   "timestamp", "headers")}} for m in msgs]
    data = b"".join(ref_entry(i, 1_700_000_000_000 + 7 * i, encode(m)) for i, m in enumerate(msgs))
    full = parse_bulk(data, "s", schema=FULL_ARROW_SCHEMA).to_pylist()
    columns = order[:keep]
    part = parse_bulk(data, "s", schema=arrow_schema(columns))
    assert part.schema.names == list(columns)
    assert part.to_pylist() == [{c: r[c] for c in columns} for r in full]


def test_broker_timestamps_outside_sparks_range_are_null():
    data = ref_entry(0, 1_700_000_000_123, ref_record(b"", b"", b"", b"")) + \
        ref_entry(1, 2**62, ref_record(b"", b"", b"", b"")) + ref_entry(2, -1, ref_record(b"", b"", b"", b""))
    stamps = parse_bulk(data, "s", schema=arrow_schema(("timestamp",))).column(0).to_pylist()
    assert stamps[0] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    assert stamps[1] is None
    assert stamps[2] == datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=datetime.timezone.utc)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 50), st.integers(0, 40))
def test_records_of_one_size_take_the_arithmetic_path_and_parse_alike(count, size):
    data = b"".join(ref_entry(i, 0, ref_record(b"x", b"k", b"\x00\x00", bytes([i % 256]) * size))
                    for i in range(count))
    assert entry_positions(data).tolist() == list(range(0, len(data), len(data) // count))
    rows = parse_bulk(data, "s").to_pylist()
    assert [r["body"] for r in rows] == [bytes([i % 256]) * size for i in range(count)]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.sampled_from([b"", b"ex", b"\xffx"]), st.integers(0, 30), st.integers(0, 70),
       st.booleans(), st.booleans())
def test_records_of_one_layout_parse_as_the_general_path_does(count, exchange, key_size, body_size, same_key,
                                                               same_props):
    """Entries of one size whose records all have the same exchange, routing key and property
    list lengths take the strided path (records._parse_uniform); it gives what the gathers give."""
    from warren.spark.read import records

    def props(i: int) -> bytes:
        i = 0 if same_props else i
        return BasicProperties(content_type="text/plain", message_id=f"m{i:04d}", headers={"n": i}).encode()

    def key(i: int) -> bytes:
        return b"k" * key_size if same_key else bytes(97 + (i + j) % 26 for j in range(key_size))

    data = b"".join(ref_entry(1000 + i, 1_700_000_000_000 + i,
                              ref_record(exchange, key(i), props(i), bytes([i % 256]) * body_size))
                    for i in range(count))
    assert records._parse_uniform(records.padded(data), count, len(data) // count, "s", FULL_ARROW_SCHEMA) is not None
    fast = parse_bulk(data, "s", schema=FULL_ARROW_SCHEMA)
    slow = parse_bulk(data, "s", verify=True, schema=FULL_ARROW_SCHEMA)  # verify: the general path
    assert fast.schema == slow.schema and fast.to_pylist() == slow.to_pylist()


def test_a_size_pattern_that_only_looks_uniform_is_walked():
    # 3 entries whose total is a multiple of the first entry's size, but the lengths differ
    data = ref_entry(0, 0, ref_record(b"", b"", b"", b"a" * 10)) + \
        ref_entry(1, 0, ref_record(b"", b"", b"", b"")) + ref_entry(2, 0, ref_record(b"", b"", b"", b"b" * 20))
    assert len(data) % (24 + 16) == 0
    assert [r["body"] for r in parse_bulk(data, "s").to_pylist()] == [b"a" * 10, b"", b"b" * 20]


def test_empty_data_is_an_empty_batch_of_the_schema():
    batch = parse_bulk(b"", "s")
    assert batch.num_rows == 0 and batch.schema == ARROW_SCHEMA


def test_damage_is_reported():
    good = ref_entry(7, 0, ref_record(b"ex", b"rk", b"\x00\x00", b"body"))
    with pytest.raises(ValueError, match="cut short"):
        parse_bulk(good[:-1], "s")
    with pytest.raises(ValueError, match="cut short"):
        parse_bulk(good + good[:10], "s")
    flipped = bytearray(good)
    flipped[-1] ^= 1
    parse_bulk(bytes(flipped), "s")  # not checked by default
    with pytest.raises(ValueError, match="CRC mismatch in the entry of offset 7"):
        parse_bulk(bytes(flipped), "s", verify=True)
    bad_record = ref_entry(9, 0, b"\x40" + b"e" * 10)  # exchange length beyond the record
    with pytest.raises(ValueError, match="malformed message record at offset 9"):
        parse_bulk(bad_record, "s")


def test_names_that_are_not_utf8_are_replaced():
    data = ref_entry(0, 0, ref_record(b"ex\xff", b"key\xfe", b"\x00\x00", b""))
    row = parse_bulk(data, "s").to_pylist()[0]
    assert (row["exchange"], row["routing_key"]) == ("ex\ufffd", "key\ufffd")


def test_header_values_render_as_documented():
    table = {
        "s": "text", "i": 42, "neg": -7, "t": True, "f": False, "d": 1.5, "dec": decimal.Decimal("3.14"),
        "ts": datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc), "x": b"\xffab", "v": None,
        "nested": {"a": 1, "b": [True, "x"]},
    }
    raw = BasicProperties(headers=table).encode()
    properties.clear_cache()
    headers, _ = properties.decode(raw)
    assert dict(headers) == {
        "s": "text", "i": "42", "neg": "-7", "t": "true", "f": "false", "d": "1.5", "dec": "3.14",
        "ts": "2024-05-01T12:00:00Z", "x": "\ufffdab", "v": None, "nested": '{"a":1,"b":[true,"x"]}',
    }


def test_offset_header_is_dropped_and_an_empty_table_is_null():
    raw = BasicProperties(headers={"x-stream-offset": 5}).encode()
    assert properties.decode(raw)[0] is None
    raw = BasicProperties(headers={}).encode()
    assert properties.decode(raw)[0] is None


prop_lists = st.builds(
    lambda ct, h, mid: BasicProperties(content_type=ct, headers=h, message_id=mid).encode(),
    st.one_of(st.none(), st.text(max_size=10)),
    st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=8), st.integers(0, 9), max_size=3)),
    st.one_of(st.none(), st.text(max_size=10)),
)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.just(b""), prop_lists), st.integers(0, 2**62))
def test_strip_offset_header_undoes_the_broker_splice(raw, offset):
    spliced = with_stream_offset(raw, offset)
    got_offset, stripped = properties.strip_offset_header(spliced)
    assert got_offset == offset
    assert properties.decode(stripped) == properties.decode(raw if raw else b"\x00\x00")


def test_strip_offset_header_finds_it_anywhere_in_the_table():
    raw = BasicProperties(headers={"x-stream-offset": 3, "after": "x"}).encode()
    offset, stripped = properties.strip_offset_header(with_stream_offset(raw, 77))
    assert offset == 77
    assert properties.decode(stripped)[0] == [("after", "x")]


def test_arrow_schema_is_the_one_spark_derives(spark):
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    from warren.spark.schema import FULL_SCHEMA_DDL, SCHEMA_DDL, check_read_schema, read_schema_ddl

    assert to_arrow_schema(StructType.fromDDL(SCHEMA_DDL), timezone="UTC").equals(ARROW_SCHEMA)
    assert to_arrow_schema(StructType.fromDDL(FULL_SCHEMA_DDL), timezone="UTC").equals(FULL_ARROW_SCHEMA)
    assert read_schema_ddl(True, True, True) == FULL_SCHEMA_DDL
    # the types the planner checks without a JVM are the ones Spark parses from the DDL
    assert check_read_schema(StructType.fromDDL(FULL_SCHEMA_DDL)) == COLUMNS
    with pytest.raises(ValueError, match="column offset is bigint in the warren source, not int"):
        check_read_schema(StructType.fromDDL("body binary, offset int"))
    with pytest.raises(ValueError, match="no column 'nope'"):
        check_read_schema(StructType.fromDDL("nope string"))


wire_text = st.binary(max_size=14).map(lambda b: b.decode("utf-8", "surrogateescape"))  # invalid UTF-8 too
any_props = st.builds(
    BasicProperties,
    content_type=st.one_of(st.none(), wire_text), content_encoding=st.one_of(st.none(), wire_text),
    headers=st.one_of(st.none(), st.dictionaries(st.text(min_size=1, max_size=6), header_values, max_size=3)),
    delivery_mode=st.one_of(st.none(), st.integers(0, 255)), priority=st.one_of(st.none(), st.integers(0, 255)),
    correlation_id=st.one_of(st.none(), wire_text), reply_to=st.one_of(st.none(), wire_text),
    expiration=st.one_of(st.none(), wire_text), message_id=st.one_of(st.none(), wire_text),
    timestamp=st.one_of(st.none(), st.integers(0, 2**64 - 1)), type=st.one_of(st.none(), wire_text),
    user_id=st.one_of(st.none(), wire_text), app_id=st.one_of(st.none(), wire_text),
    cluster_id=st.one_of(st.none(), wire_text),
).map(lambda p: p.encode())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(any_props, st.just(b"")), min_size=1, max_size=20))
def test_field_by_field_decoding_equals_decoding_by_distinct_list(lists):
    import numpy as np
    import pyarrow as pa

    from warren.spark.read.gather import padded
    from warren.spark.read.property_columns import property_columns

    joined = b"".join(lists)
    lengths = np.array([len(p) for p in lists], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    args = (padded(joined), pa.py_buffer(joined), starts, lengths)
    by_list = property_columns(*args, way="distinct")
    by_field = property_columns(*args, way="fields")
    assert set(by_list) == set(by_field) == {"headers", "properties", "message_id", "content_type"}
    for name, column in by_list.items():
        assert by_field[name].type == column.type
        assert by_field[name].to_pylist() == column.to_pylist()
    if len(set(lists)) == 1:  # every row the same list: decoded once, the same columns
        by_one = property_columns(*args, way="one")
        assert {k: v.to_pylist() for k, v in by_one.items()} == {k: v.to_pylist() for k, v in by_list.items()}
    # the flat fields alone, by the walk, are the struct's fields
    flat = property_columns(*args, wanted=("message_id",))
    assert list(flat) == ["message_id"] and flat["message_id"].to_pylist() == by_list["message_id"].to_pylist()


@pytest.mark.parametrize("width", [1, 7, 8, 9, 12, 16, 23])
def test_a_name_that_differs_in_one_octet_is_not_taken_for_a_constant(width):
    """records._all_same compares eight octets at a time, the last word overlapping: a
    difference at any place, the last octet included, is seen."""
    from warren.spark.read import records

    for place in range(width):
        keys = [b"k" * width] * 5
        keys[3] = keys[3][:place] + b"x" + keys[3][place + 1:]
        data = b"".join(ref_entry(i, 0, ref_record(b"", k, b"", b"body")) for i, k in enumerate(keys))
        assert [r["routing_key"] for r in parse_bulk(data, "s").to_pylist()] == [k.decode() for k in keys]
        step = len(data) // 5
        assert not records._all_same(records.padded(data), 5, step, 24 + 2, width)


def test_a_pooled_buffer_is_not_handed_out_while_anything_refers_to_it():
    import pyarrow as pa

    from warren.spark.read.gather import BufferPool

    pool = BufferPool(keep=2)
    first = pool.take(100)
    held = pa.py_buffer(first[10:20])  # a view of a view, held by Arrow only
    del first
    second = pool.take(50)
    assert not _shares(second, held)
    del second
    third = pool.take(80)  # the buffer of 50, free again, is too small: replaced by one of 80
    assert not _shares(third, held) and third.base.size == 80
    del held, third
    assert pool.take(60).base.size == 80  # the smallest free one that fits
    assert pool.take(90).base.size == 100


def _shares(array, buffer) -> bool:
    start = array.__array_interface__["data"][0]
    return start <= buffer.address < start + array.base.size or \
        buffer.address <= start < buffer.address + buffer.size


def test_batches_parsed_into_one_pool_keep_their_values_while_held():
    """A batch still held (by Spark's serializer, say) keeps its buffers: the next parse into
    the same pool takes others, and every batch reads back as parsed without a pool."""
    from warren.spark.read.gather import BufferPool
    from warren.spark.read.records import parse_padded, padded

    pool = BufferPool(keep=3)
    answers = [b"".join(ref_entry(1000 * j + i, 0, ref_record(b"", b"key", b"\x00\x00", bytes([j]) * 50))
                        for i in range(100)) for j in range(6)]
    held = []
    for data in answers:
        held.append(parse_padded(padded(data), len(data), "s", pool=pool))
        if len(held) > 4:
            held.pop(0)  # batches given up, their buffers free again
    for data, batch in zip(answers[-4:], held):
        assert batch.to_pylist() == parse_bulk(data, "s").to_pylist()
