"""Protocol-header dispatch (warren.protocol.header), AMQP 0-10 included."""

import pytest

from warren.protocol import header
from warren.protocol.header import HEADER_0_10, NEED_MORE, is_0_10, read_header


def test_the_0_10_header_is_recognised_and_served():
    assert HEADER_0_10 == b"AMQP\x01\x01\x00\x0a" and is_0_10(HEADER_0_10)
    assert not is_0_10(b"AMQP\x00\x00\x09\x01")
    assert header.SERVE_0_10 is True
    assert read_header(HEADER_0_10) == header.AMQP_0_10
    assert read_header(b"AMQP\x01\x01") is NEED_MORE
    assert read_header(b"AMQP\x00\x00\x09\x01").key == "0-9-1"


def test_with_0_10_not_served_its_header_is_refused(monkeypatch):
    monkeypatch.setattr(header, "SERVE_0_10", False)
    assert read_header(HEADER_0_10) is None  # answered with our preferred header, then closed


@pytest.mark.parametrize("octets", [b"GET / HT", b"AMQP\x01\x01\x00\x0b"])
def test_other_headers_are_not_ours(octets):
    assert read_header(octets) is None


@pytest.mark.parametrize("octets", [b"AMQP\x03\x01\x00\x00", b"AMQP\x00\x01\x00\x00"])
def test_the_two_1_0_headers_are_recognised_and_served(octets):
    assert header.SERVE_1_0 is True
    assert read_header(octets) == header.AMQP_1_0


def test_with_1_0_not_served_its_headers_are_refused(monkeypatch):
    monkeypatch.setattr(header, "SERVE_1_0", False)
    assert read_header(b"AMQP\x03\x01\x00\x00") is None
