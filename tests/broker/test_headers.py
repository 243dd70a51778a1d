"""Headers matching (warren.broker.exchanges.headers): x-match all / any / all-with-x /
any-with-x, void binding values, x- arguments, and the x-match check at bind time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from warren.broker.exchanges.headers import HeadersExchange, headers_match
from warren.errors import PreconditionFailed

from .helpers import Dest


@pytest.mark.parametrize("arguments,headers,expected", [
    # all (the default)
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x"}, True),
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1}, False),
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 3}, True),
    ({"x-match": "all", "a": 1, "b": "x"}, {"a": 1, "b": "y"}, False),
    ({"a": 1}, {"a": 1, "b": 2}, True),
    ({"a": 1, "b": 2}, {"a": 1}, False),
    ({"x-match": "all"}, {}, True),
    ({}, {}, True),
    ({"x-match": "all"}, {"z": 1}, True),
    # any
    ({"x-match": "any", "a": 1, "b": "x"}, {"a": 1}, True),
    ({"x-match": "any", "a": 1, "b": "x"}, {"b": "x"}, True),
    ({"x-match": "any", "a": 1, "b": "x"}, {"a": 2}, False),
    ({"x-match": "any", "a": 1, "b": "x"}, {}, False),
    ({"x-match": "any"}, {"z": 1}, False),
], ids=str)
def test_all_needs_every_binding_header_and_any_needs_one(arguments, headers, expected):
    assert headers_match(arguments, headers) is expected


@pytest.mark.parametrize("mode", ["all", "any"])
def test_a_void_binding_value_matches_on_presence_alone(mode):
    assert headers_match({"x-match": mode, "a": None}, {"a": "anything"})
    assert headers_match({"x-match": mode, "a": None}, {"a": None})
    assert headers_match({"x-match": mode, "a": None}, {"a": 0})
    assert not headers_match({"x-match": mode, "a": None}, {"b": "anything"})


def test_a_void_message_value_does_not_match_a_value():
    assert not headers_match({"a": "x"}, {"a": None})


@pytest.mark.parametrize("arguments,headers,expected", [
    ({"x-match": "all", "x-foo": "bar"}, {"x-foo": "baz"}, True),
    ({"x-match": "all", "x-foo": "bar", "a": 1}, {"a": 1}, True),
    ({"x-match": "any", "x-foo": "bar", "a": 1}, {"x-foo": "bar"}, False),
    ({"x-match": "any", "x-foo": "bar"}, {"x-foo": "bar"}, False),
    ({"x-foo": None}, {}, True),
], ids=str)
def test_x_binding_arguments_are_ignored_without_with_x(arguments, headers, expected):
    assert headers_match(arguments, headers) is expected


@pytest.mark.parametrize("arguments,headers,expected", [
    ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1, "x-foo": "bar"}, True),
    ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, False),
    ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1, "x-foo": "baz"}, False),
    ({"x-match": "all-with-x"}, {"q": 1}, True),
    ({"x-match": "all-with-x", "x-foo": None}, {"x-foo": 1}, True),
    ({"x-match": "any-with-x", "x-foo": "bar", "a": 1}, {"x-foo": "bar"}, True),
    ({"x-match": "any-with-x", "x-foo": "bar", "a": 1}, {"x-foo": "baz"}, False),
    ({"x-match": "any-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, True),
    ({"x-match": "any-with-x"}, {"x-match": "any-with-x"}, False),  # x-match itself is never a header rule
], ids=str)
def test_with_x_modes_match_x_headers_too(arguments, headers, expected):
    assert headers_match(arguments, headers) is expected


@pytest.mark.parametrize("binding_value,header_value,expected", [
    (1, 1, True),
    (1, "1", False),
    (1, True, False),  # a boolean is not a number (RabbitMQ)
    (True, 1, False),
    (True, True, True),
    (False, 0, False),
    ("1", b"1", True),  # long string and byte array compare by their octets (RabbitMQ)
    (b"\xff", "\udcff", True),
    ("x", "x", True),
    ({"n": 1}, {"n": 1}, True),
    ({"n": 1}, {"n": 2}, False),
    ([1, 2], [1, 2], True),
    ([1, 2], [2, 1], False),
    (2**40, 2**40, True),
], ids=str)
def test_values_compare_by_type_class_and_value(binding_value, header_value, expected):
    assert headers_match({"a": binding_value}, {"a": header_value}) is expected


# --- properties ------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "c", "x-a", "x-b"])
values = st.one_of(st.sampled_from([1, 2, "1", "2", True, None]))
argument_sets = st.dictionaries(names, values, max_size=4)
header_sets = st.dictionaries(names, values.filter(lambda v: v is not None), max_size=5)


def model(mode: str, arguments: dict, headers: dict) -> bool:
    """A direct statement of the rules, for comparison."""
    with_x = mode.endswith("-with-x")
    rules = {k: v for k, v in arguments.items() if k != "x-match" and (with_x or not k.startswith("x-"))}

    def ok(name, value):
        if name not in headers:
            return False
        h = headers[name]
        return value is None or (type(h) is type(value) and h == value)

    hits = [ok(k, v) for k, v in rules.items()]
    return all(hits) if mode.startswith("all") else any(hits)


@settings(max_examples=300)
@given(st.sampled_from(["all", "any", "all-with-x", "any-with-x"]), argument_sets, header_sets)
def test_headers_match_agrees_with_a_model_of_the_rules(mode, arguments, headers):
    assert headers_match({"x-match": mode, **arguments}, headers) is model(mode, arguments, headers)


@settings(max_examples=200)
@given(argument_sets, header_sets)
def test_all_is_the_default_mode(arguments, headers):
    assert headers_match(arguments, headers) is headers_match({"x-match": "all", **arguments}, headers)


@settings(max_examples=200)
@given(argument_sets)
def test_a_message_carrying_exactly_the_binding_values_matches_in_every_mode(arguments):
    headers = {k: (v if v is not None else "present") for k, v in arguments.items()}
    for mode in ("all", "all-with-x"):
        assert headers_match({"x-match": mode, **arguments}, headers)
    plain = [k for k in arguments if not k.startswith("x-")]
    assert headers_match({"x-match": "any", **arguments}, headers) is bool(plain)
    assert headers_match({"x-match": "any-with-x", **arguments}, headers) is bool(arguments)


# --- the exchange --------------------------------------------------------------------------

class Msg:
    def __init__(self, headers: dict) -> None:
        self.headers = headers


@pytest.mark.parametrize("mode", ["all", "any", "all-with-x", "any-with-x"])
def test_a_binding_with_a_valid_x_match_is_accepted(mode):
    assert HeadersExchange("h").bind(Dest("q"), "", {"x-match": mode, "a": 1})


@pytest.mark.parametrize("mode", ["bogus", "ALL", "", b"any", 1, None])
def test_a_binding_with_an_invalid_x_match_is_refused_with_406(mode):
    ex = HeadersExchange("h")
    with pytest.raises(PreconditionFailed) as ei:
        ex.bind(Dest("q"), "", {"x-match": mode, "a": 1})
    assert ei.value.reply_code == 406
    assert ex.bindings == {} and ex.match("", Msg({"a": 1})) == ()


def test_the_exchange_routes_on_headers_and_ignores_the_routing_key():
    ex = HeadersExchange("h")
    q_all, q_any = Dest("all"), Dest("any")
    ex.bind(q_all, "ignored", {"x-match": "all", "a": 1, "b": 2})
    ex.bind(q_any, "", {"x-match": "any", "a": 1, "b": 2})
    assert ex.match("whatever", Msg({"a": 1, "b": 2})) == [q_all, q_any]
    assert ex.match("", Msg({"a": 1})) == [q_any]
    assert ex.match("", Msg({})) == []
    ex.unbind(q_any, "", {"x-match": "any", "a": 1, "b": 2})
    assert ex.match("", Msg({"a": 1})) == []
