"""Generated method and property classes (warren.spec.amqp0_9_1): encode/decode round trips, bit
packing (INVENTORY.md §3.3, §5.1) and the basic property flags (§8.1)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from warren.spec.fields import TableValueError
from warren.spec import amqp0_9_1 as spec

ALL_METHODS = sorted(spec.METHODS.values(), key=lambda c: c.INDEX)
DECODE_ERRORS = (IndexError, struct.error, TableValueError)

shortstr = st.binary(max_size=255).map(lambda b: b.decode("utf-8", "surrogateescape"))
small_text = st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape"))
table_values = st.recursive(
    st.one_of(small_text, st.booleans(), st.integers(-(2**63), 2**63 - 1), st.binary(max_size=10), st.none(),
              st.floats(allow_nan=False)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(small_text, children, max_size=3)),
    max_leaves=6,
)
tables = st.dictionaries(small_text, table_values, max_size=4)

BY_TYPE = {
    "octet": st.integers(0, 2**8 - 1),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**64 - 1),
    "timestamp": st.integers(0, 2**64 - 1),
    "shortstr": shortstr,
    "longstr": st.binary(max_size=300),
    "bit": st.booleans(),
    "table": tables,
}


def method_values(cls):
    return st.fixed_dictionaries({name: BY_TYPE[typ] for name, typ in cls.FIELDS})


def build(cls, values: dict):
    m = cls()
    for name, value in values.items():
        setattr(m, name, value)
    return m


def test_every_field_type_in_the_spec_has_a_strategy():
    types = {typ for cls in ALL_METHODS for _, typ in cls.FIELDS}
    types |= {typ for _, typ in spec.BasicProperties.FIELDS}
    assert types <= set(BY_TYPE)


def test_every_method_class_is_listed_under_its_class_and_method_ids():
    assert len(ALL_METHODS) == 66  # 0-9-1 with RabbitMQ's extensions (INVENTORY.md §7.3)
    for cls in ALL_METHODS:
        assert cls.INDEX == cls.CLASS_ID << 16 | cls.METHOD_ID, cls.NAME
        assert spec.METHODS[cls.INDEX] is cls
        assert cls().encode()[:4] == struct.pack(">HH", cls.CLASS_ID, cls.METHOD_ID), cls.NAME


@pytest.mark.parametrize("cls", ALL_METHODS, ids=lambda c: c.NAME)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_method_round_trips_and_decode_consumes_exactly_the_encoding(cls, data):
    values = data.draw(method_values(cls))
    m = build(cls, values)
    payload = m.encode()
    assert payload[:4] == struct.pack(">HH", cls.CLASS_ID, cls.METHOD_ID)
    out, off = cls.decode(payload, 4)
    assert off == len(payload)
    assert type(out) is cls
    assert out == m
    assert out.as_dict() == values
    # with bytes after it (the frame-end, the next frame) decoding stops at the same place
    out2, off2 = cls.decode(bytearray(payload + b"\xce\x01\x02"), 4)
    assert off2 == len(payload) and out2 == m


@pytest.mark.parametrize("cls", [c for c in ALL_METHODS if c.FIELDS], ids=lambda c: c.NAME)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_every_truncation_of_a_method_fails_to_decode(cls, data):
    payload = build(cls, data.draw(method_values(cls))).encode()
    cut = data.draw(st.integers(4, len(payload) - 1))
    with pytest.raises(DECODE_ERRORS):
        cls.decode(payload[:cut], 4)


def test_every_default_constructed_method_round_trips():
    for cls in ALL_METHODS:
        m = cls()
        out, off = cls.decode(m.encode(), 4)
        assert out == m and off == len(m.encode()), cls.NAME


# --- bit packing -------------------------------------------------------------------------------

def bit_runs(cls) -> list[list[str]]:
    """Runs of consecutive bit fields: each run shares octets, first field in the lowest bit."""
    runs, current = [], []
    for name, typ in cls.FIELDS:
        if typ == "bit":
            current.append(name)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


BIT_CASES = [(cls, name, i) for cls in ALL_METHODS for run in bit_runs(cls) for i, name in enumerate(run)]


@pytest.mark.parametrize("cls,name,position", BIT_CASES, ids=[f"{c.NAME}.{n}" for c, n, _ in BIT_CASES])
def test_each_bit_field_sets_its_own_bit_counting_from_the_lowest(cls, name, position):
    assert position < 8  # no 0-9-1 method has more than 8 bits in a row
    off_bits = build(cls, {n: False for n, t in cls.FIELDS if t == "bit"}).encode()
    on_bits = build(cls, {n: n == name for n, t in cls.FIELDS if t == "bit"}).encode()
    assert len(off_bits) == len(on_bits)
    diff = [(a, b) for a, b in zip(off_bits, on_bits) if a != b]
    assert diff == [(0, 1 << position)]
    assert getattr(cls.decode(on_bits, 4)[0], name) is True


@pytest.mark.parametrize("mandatory,immediate,octet", [
    (False, False, 0x00), (True, False, 0x01), (False, True, 0x02), (True, True, 0x03),
])
def test_basic_publish_packs_mandatory_and_immediate_into_one_octet(mandatory, immediate, octet):
    m = spec.BasicPublish(ticket=0, exchange="ex", routing_key="rk", mandatory=mandatory, immediate=immediate)
    assert m.encode() == b"\x00\x3c\x00\x28" + b"\x00\x00" + b"\x02ex" + b"\x02rk" + bytes([octet])


@pytest.mark.parametrize("flag,mask", [
    ("passive", 0x01), ("durable", 0x02), ("exclusive", 0x04), ("auto_delete", 0x08), ("nowait", 0x10),
])
def test_queue_declare_bits_are_passive_durable_exclusive_auto_delete_nowait(flag, mask):
    m = spec.QueueDeclare(queue="q", **{flag: True})
    assert m.encode() == b"\x00\x32\x00\x0a" + b"\x00\x00" + b"\x01q" + bytes([mask]) + b"\x00\x00\x00\x00"
    out, _ = spec.QueueDeclare.decode(b"\x00\x00\x01q" + bytes([mask]) + b"\x00\x00\x00\x00", 0)
    assert [n for n in ("passive", "durable", "exclusive", "auto_delete", "nowait") if getattr(out, n)] == [flag]


def test_exchange_declare_bits_are_passive_durable_auto_delete_internal_nowait():
    m = spec.ExchangeDeclare(exchange="e", type="topic", passive=True, auto_delete=True, nowait=True)
    assert m.encode() == b"\x00\x28\x00\x0a\x00\x00\x01e\x05topic" + bytes([0x01 | 0x04 | 0x10]) + b"\x00" * 4


def test_basic_nack_packs_multiple_then_requeue_after_the_delivery_tag():
    m = spec.BasicNack(delivery_tag=2**64 - 1, multiple=False, requeue=True)
    assert m.encode() == b"\x00\x3c\x00\x78" + b"\xff" * 8 + b"\x02"


def test_unused_high_bits_in_a_bit_octet_are_ignored_on_decode():
    out, off = spec.BasicPublish.decode(b"\x00\x00\x00\x00\xfc", 0)
    assert (out.mandatory, out.immediate, off) == (False, False, 5)


def test_basic_deliver_bit_is_followed_by_more_strings():
    m = spec.BasicDeliver(consumer_tag="c", delivery_tag=7, redelivered=True, exchange="x", routing_key="k")
    assert m.encode() == b"\x00\x3c\x00\x3c\x01c" + struct.pack(">Q", 7) + b"\x01" + b"\x01x\x01k"


def test_connection_tune_ok_is_short_long_short():
    m = spec.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=60)
    assert m.encode() == b"\x00\x0a\x00\x1f" + struct.pack(">HIH", 2047, 131072, 60)


def test_a_shortstr_argument_over_255_octets_refuses_to_encode():
    with pytest.raises(TableValueError):
        spec.QueueDeclare(queue="q" * 256).encode()


# --- basic properties ------------------------------------------------------------------------

PROPERTY_NAMES = [n for n, _ in spec.BasicProperties.FIELDS]


def test_basic_has_the_fourteen_properties_in_wire_order():
    assert PROPERTY_NAMES == [
        "content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
        "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id",
    ]


properties_st = st.fixed_dictionaries(
    {}, optional={name: BY_TYPE[typ] for name, typ in spec.BasicProperties.FIELDS})


@settings(max_examples=200)
@given(properties_st)
def test_basic_properties_round_trip_for_any_subset(values):
    p = spec.BasicProperties(**values)
    data = p.encode()
    (flags,) = struct.unpack_from(">H", data)
    expected_flags = 0
    for i, name in enumerate(PROPERTY_NAMES):
        if name in values:
            expected_flags |= 0x8000 >> i
    assert flags == expected_flags
    out, off = spec.BasicProperties.decode(data, 0)
    assert off == len(data)
    assert out == p
    assert {n: v for n, v in out.as_dict().items() if v is not None} == values
    out2, off2 = spec.BasicProperties.decode(data + b"\xce\x00", 0)
    assert off2 == len(data) and out2 == p


@pytest.mark.parametrize("i,name", list(enumerate(PROPERTY_NAMES)))
def test_each_property_has_flag_bit_15_minus_its_position(i, name):
    typ = dict(spec.BasicProperties.FIELDS)[name]
    value = {"shortstr": "v", "table": {}, "octet": 1, "timestamp": 1}[typ]
    data = spec.BasicProperties(**{name: value}).encode()
    assert struct.unpack_from(">H", data)[0] == 0x8000 >> i


def test_content_type_is_flag_0x8000_and_cluster_id_is_flag_0x0004():
    assert spec.BasicProperties(content_type="a").encode() == b"\x80\x00\x01a"
    assert spec.BasicProperties(cluster_id="c").encode() == b"\x00\x04\x01c"
    assert spec.BasicProperties(delivery_mode=2).encode() == b"\x10\x00\x02"
    assert spec.BasicProperties(timestamp=5).encode() == b"\x00\x40" + struct.pack(">Q", 5)


def test_no_properties_is_a_zero_flag_word():
    assert spec.BasicProperties().encode() == b"\x00\x00"
    out, off = spec.BasicProperties.decode(b"\x00\x00", 0)
    assert off == 2 and all(v is None for v in out.as_dict().values())


def test_properties_are_decoded_in_flag_order_not_name_order():
    data = b"\x80\x08" + b"\x0atext/plain" + b"\x03app"  # content-type and app-id
    out, off = spec.BasicProperties.decode(data, 0)
    assert (out.content_type, out.app_id, off) == ("text/plain", "app", len(data))


def test_a_continuation_flag_word_is_skipped():
    data = b"\x80\x01" + b"\x00\x00" + b"\x01a"
    out, off = spec.BasicProperties.decode(data, 0)
    assert (out.content_type, off) == ("a", len(data))


@settings(max_examples=100)
@given(properties_st.filter(bool), st.data())
def test_every_truncation_of_a_property_list_fails_to_decode(values, data):
    encoded = spec.BasicProperties(**values).encode()
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(DECODE_ERRORS):
        spec.BasicProperties.decode(encoded[:cut], 0)
