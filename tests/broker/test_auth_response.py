"""SASL responses (warren.broker.auth.parse_response) from hostile clients: whatever the octets,
a (user, password) pair or a ValueError, which the session answers 403 ACCESS_REFUSED as a failed
login (issue 16: a malformed AMQPLAIN response used to leak IndexError/RecursionError, 541)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from tests.spec.test_fields import mutations, nested_table
from warren.broker.auth import parse_response


def amqplain(**fields) -> bytes:
    out = b""
    for name, value in fields.items():
        v = value.encode()
        out += bytes([len(name)]) + name.encode() + b"S" + struct.pack(">I", len(v)) + v
    return out


GOOD = amqplain(LOGIN="guest", PASSWORD="guest")


def test_a_well_formed_amqplain_response_gives_the_credentials():
    assert parse_response("AMQPLAIN", GOOD) == ("guest", "guest")
    assert parse_response("PLAIN", b"\x00guest\x00secret") == ("guest", "secret")


@pytest.mark.parametrize("response", [
    GOOD[:-3],  # the table cut short (inside the password)
    GOOD + b"\x01nI\x00\x00",  # an integer cut short
    GOOD + b"\x01nZ\x00",  # an unknown type
    GOOD + b"\x20ab",  # a name running past the end
    GOOD + b"\x01nF" + nested_table(5000),  # a 5,000-deep table
    GOOD + b"\x01nT" + b"\xff" * 8,  # a timestamp no datetime can hold
    b"",
    amqplain(PASSWORD="guest"),
    b"\x05LOGINI\x00\x00\x00\x01\x08PASSWORDS\x00\x00\x00\x00",  # LOGIN not a string
], ids=["table-cut", "int-cut", "unknown-type", "name-past-end", "deep-5000", "huge-timestamp", "empty",
        "no-login", "login-int"])
def test_a_malformed_amqplain_response_is_a_value_error(response):
    with pytest.raises(ValueError):
        parse_response("AMQPLAIN", response)


@pytest.mark.parametrize("mechanism, response", [("PLAIN", b"guestguest"), ("PLAIN", b"\x00\xff\xfe\x00pw"),
                                                 ("EXTERNAL", b""), ("FOO", GOOD)])
def test_other_bad_responses_are_value_errors(mechanism, response):
    with pytest.raises(ValueError):
        parse_response(mechanism, response)


@settings(max_examples=500)
@given(st.sampled_from(["AMQPLAIN", "PLAIN"]),
       st.one_of(mutations(GOOD), st.binary(max_size=60), st.binary(max_size=40).map(lambda b: GOOD + b)))
def test_any_response_gives_credentials_or_a_value_error_only(mechanism, response):
    try:
        user, password = parse_response(mechanism, response)
    except ValueError:
        return
    assert isinstance(user, str) and isinstance(password, str)
