"""A receiver's source filter set as RabbitMQ 4.1 reads it (warren/protocol/amqp1_0/filters.py)."""

import datetime
import uuid

import pytest

from warren.codec.amqp1_0.types import Described, Long, Symbol, Timestamp, UInt, ULong
from warren.protocol.amqp1_0.filters import Match, parse_filter
from warren.spec import amqp1_0 as spec

S = Symbol
OFFSET = S("rabbitmq:stream-offset-spec")


def d(descriptor, value):
    return Described(S(descriptor) if isinstance(descriptor, str) else ULong(descriptor), value)


@pytest.mark.parametrize("value, want", [
    (S("first"), "first"), ("last", "last"), ("next", "next"), ("1h", "1h"),
    (ULong(7), 7), (Long(0), 0),
    (Timestamp(1_700_000_000_999), datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)),
])
def test_offset_specs_become_the_stream_readers_argument(value, want):
    f = parse_filter({S("o"): Described(OFFSET, value)}, stream=True)
    assert f.arguments == {"x-stream-offset": want}
    assert f.effective == {S("o"): Described(OFFSET, value)}


@pytest.mark.parametrize("value", [Long(-1), True, None, [1]])
def test_an_offset_it_cannot_read_is_left_out(value):
    f = parse_filter({S("o"): Described(OFFSET, value)}, stream=True)
    assert f.arguments == {} and f.effective == {}


def test_stream_filter_values_and_match_unfiltered():
    f = parse_filter({S("f"): d("rabbitmq:stream-filter", ["a", 5, "b"]),
                      S("u"): d("rabbitmq:stream-match-unfiltered", True)}, stream=True)
    assert f.arguments == {"x-stream-filter": ["a", "b"], "x-stream-match-unfiltered": True}
    f = parse_filter({S("f"): d("rabbitmq:stream-filter", "a")}, stream=True)
    assert f.arguments == {"x-stream-filter": "a"}


def test_rabbitmq_4_0s_undescribed_stream_filters_are_read_by_their_name():
    f = parse_filter({S("rabbitmq:stream-offset-spec"): "first"}, stream=True)
    assert f.arguments == {"x-stream-offset": "first"}


def test_a_queue_that_is_not_a_stream_gets_no_filter():
    f = parse_filter({S("o"): Described(OFFSET, "first")}, stream=False)
    assert (f.arguments, f.match, f.effective) == ({}, None, {})
    assert parse_filter(None, stream=True).effective is None


def props(**kw):
    return spec.Properties(**kw)


def matches(filter_set, properties=None, application=None) -> bool:
    f = parse_filter(filter_set, stream=True)
    assert f.match is not None, f.effective
    return f.match.matches(properties or props(), application or {})


def test_property_expressions_by_symbol_or_code():
    for descriptor in ("amqp:properties-filter", 0x173):
        flt = {S("p"): d(descriptor, {S("subject"): "orders", S("content-type"): S("text/plain")})}
        assert matches(flt, props(subject="orders", content_type=S("text/plain")))
        assert not matches(flt, props(subject="orders"))


@pytest.mark.parametrize("ref, value, want", [
    ("&p:ord", "orders", True), ("&p:ord", "borders", False), ("&s:ers", "orders", True),
    ("&s:ers", "order", False), ("&&p", "&p", True), ("&&p", "&&p", False), ("&p:", "", True),
])
def test_string_modifiers(ref, value, want):
    assert matches({S("p"): d("amqp:properties-filter", {S("subject"): ref})}, props(subject=value)) is want


def test_an_ampersand_that_is_no_modifier_leaves_the_expression_out():
    f = parse_filter({S("p"): d("amqp:properties-filter", {S("subject"): "&x"})}, stream=True)
    assert f.match is None and f.effective == {}


@pytest.mark.parametrize("ref, value, want", [
    (Long(5), 5, True), (5.0, 5, True), (Long(5), 6, False), (True, True, True), (True, 1, False),
    (Long(1), True, False), ("abc", b"abc", True), (None, "x", True), ("x", None, False),
    (None, None, False),  # a null reference: any value, but the key must be there (RabbitMQ's)
])
def test_application_property_values(ref, value, want):
    application = {} if value is None else {"k": value}
    f = parse_filter({S("a"): d("amqp:application-properties-filter", {"k": ref})}, stream=True)
    assert f.match.matches(props(), application) is want


def test_application_property_keys_are_strings_not_symbols():
    f = parse_filter({S("a"): d("amqp:application-properties-filter", {S("k"): "v"})}, stream=True)
    assert f.match is None


def test_ids_users_and_numbers_of_the_right_types():
    u = uuid.uuid4()
    assert matches({S("p"): d(0x173, {S("message-id"): u})}, props(message_id=u))
    assert matches({S("p"): d(0x173, {S("correlation-id"): ULong(9)})}, props(correlation_id=ULong(9)))
    assert matches({S("p"): d(0x173, {S("user-id"): b"guest"})}, props(user_id=b"guest"))
    assert matches({S("p"): d(0x173, {S("group-sequence"): UInt(3)})}, props(group_sequence=UInt(3)))
    for wrong in ({S("message-id"): Long(9)}, {S("subject"): None}, {S("user-id"): "guest"}, {S("group-sequence"): Long(3)},
                  {S("content-type"): "text/plain"}, {S("no-such"): "x"}):
        assert parse_filter({S("p"): d(0x173, wrong)}, stream=True).match is None


def test_one_expression_per_section_at_most_sixteen_fields_and_every_one_must_hold():
    flt = {S("a1"): d(0x174, {"k": "v"}), S("a2"): d(0x174, {"k": "w"}), S("p"): d(0x173, {S("to"): "&p:/q"})}
    f = parse_filter(flt, stream=True)
    assert set(f.effective) == {S("a1"), S("p")}
    assert f.match.matches(props(to="/queues/x"), {"k": "v"})
    assert not f.match.matches(props(to="/exchanges/x"), {"k": "v"})
    assert not f.match.matches(props(to="/queues/x"), {"k": "w"})
    assert parse_filter({S("a"): d(0x174, {f"k{i}": "v" for i in range(17)})}, stream=True).match is None
    assert parse_filter({S("a"): d(0x174, {})}, stream=True).match is None


def test_unknown_filters_are_left_out():
    f = parse_filter({S("odd"): d("example.org:odd-filter", "a = 1"), "not-a-symbol": d(0x174, {"k": "v"}),
                      S("x"): "plain"}, stream=True)
    assert (f.arguments, f.match, f.effective) == ({}, None, {})


def test_match_alone():
    m = Match()
    assert m.matches(props(), {})
