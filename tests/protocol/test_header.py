"""Protocol-header dispatch (warren.protocol.header), AMQP 0-10 included."""

import pytest

from warren.protocol import header
from warren.protocol.header import HEADER_0_10, NEED_MORE, is_0_10, read_header


def test_the_0_10_header_is_recognised_but_not_served_until_the_adapter_exists():
    assert HEADER_0_10 == b"AMQP\x01\x01\x00\x0a" and is_0_10(HEADER_0_10)
    assert not is_0_10(b"AMQP\x00\x00\x09\x01")
    assert header.SERVE_0_10 is False
    assert read_header(HEADER_0_10) is None  # answered with our preferred header, as today


def test_with_0_10_served_the_header_reads_as_0_10(monkeypatch):
    monkeypatch.setattr(header, "SERVE_0_10", True)
    assert read_header(HEADER_0_10) == header.AMQP_0_10
    assert read_header(b"AMQP\x01\x01") is NEED_MORE
    assert read_header(b"AMQP\x00\x00\x09\x01").key == "0-9-1"


@pytest.mark.parametrize("octets", [b"GET / HT", b"AMQP\x01\x01\x00\x0b"])
def test_other_headers_are_not_ours(octets):
    assert read_header(octets) is None
