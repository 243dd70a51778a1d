"""The x-stream-offset header splice (warren/broker/queues/stream_header.py), checked against the
real property decoder: every other property and header must come back unchanged."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from warren.broker.queues.stream_header import with_stream_offset
from warren.spec.amqp0_9_1 import BasicProperties

INT64 = st.integers(-2**63, 2**63 - 1)
SHORT = st.text(max_size=20).filter(lambda s: len(s.encode("utf-8", "surrogateescape")) <= 255)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=30) | st.binary(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SHORT, inner, max_size=4),
    max_leaves=10,
)
HEADERS = st.dictionaries(SHORT, VALUES, max_size=6)
PROPERTIES = st.builds(
    BasicProperties,
    content_type=st.none() | SHORT, content_encoding=st.none() | SHORT, headers=st.none() | HEADERS,
    delivery_mode=st.none() | st.integers(0, 255), priority=st.none() | st.integers(0, 255),
    correlation_id=st.none() | SHORT, reply_to=st.none() | SHORT, expiration=st.none() | SHORT,
    message_id=st.none() | SHORT,
    timestamp=st.none() | st.integers(0, 2**64 - 1),
    type=st.none() | SHORT, user_id=st.none() | SHORT, app_id=st.none() | SHORT, cluster_id=st.none() | SHORT,
)
FIELDS = [name for name, _ in BasicProperties.FIELDS if name != "headers"]


def decoded(props: bytes) -> BasicProperties:
    p, end = BasicProperties.decode(props, 0)
    assert end == len(props)  # nothing left over: the lengths were fixed right
    return p


@settings(max_examples=400, deadline=None)
@given(PROPERTIES, INT64)
def test_the_offset_header_is_added_and_everything_else_survives(props, offset):
    encoded = props.encode()
    out = decoded(with_stream_offset(encoded, offset))
    original = decoded(encoded)
    expected = dict(original.headers or {})
    expected["x-stream-offset"] = offset
    assert out.headers == expected
    for name in FIELDS:
        assert getattr(out, name) == getattr(original, name), name


@settings(max_examples=200, deadline=None)
@given(PROPERTIES, INT64, INT64)
def test_an_offset_header_already_there_is_replaced(props, old, offset):
    props.headers = {**(props.headers or {}), "x-stream-offset": old}
    once = with_stream_offset(props.encode(), old)
    out = decoded(with_stream_offset(once, offset))
    assert out.headers["x-stream-offset"] == offset
    assert list(out.headers).count("x-stream-offset") == 1
    assert {k: v for k, v in out.headers.items() if k != "x-stream-offset"} == {
        k: v for k, v in props.headers.items() if k != "x-stream-offset"}


def test_empty_properties_get_a_table_with_the_offset_alone():
    out = with_stream_offset(b"", 7)
    assert decoded(out).headers == {"x-stream-offset": 7}
    assert out == b"\x20\x00" + (25).to_bytes(4, "big") + b"\x0fx-stream-offset" + b"l" + (7).to_bytes(8, "big")


def test_other_headers_keep_their_octets_and_the_entry_is_a_signed_long():
    # a short int ('s') and a byte ('b') would become 'I' if decoded and re-encoded
    table = b"\x01s" + b"s\x00\x07" + b"\x01b" + b"b\xff"
    props = b"\x20\x00" + len(table).to_bytes(4, "big") + table
    out = with_stream_offset(props, -1)
    assert out == b"\x20\x00" + (len(table) + 25).to_bytes(4, "big") + table + b"\x0fx-stream-offset" + b"l" + b"\xff" * 8


def test_the_key_octets_inside_another_value_do_not_count_as_the_key():
    props = BasicProperties(headers={"note": b"\x0fx-stream-offset"}, message_id="m").encode()
    out = decoded(with_stream_offset(props, 3))
    assert out.headers == {"note": b"\x0fx-stream-offset", "x-stream-offset": 3} and out.message_id == "m"


def test_a_continuation_flag_word_is_skipped():
    # flags with the continuation bit, a zero second word, then content-type "a"
    props = b"\x80\x01\x00\x00\x01a"
    out = with_stream_offset(props, 5)
    assert out[:4] == b"\xa0\x01\x00\x00" and out[4:6] == b"\x01a"
    assert decoded(out).headers == {"x-stream-offset": 5} and decoded(out).content_type == "a"
