"""Message records coming back into a queue (warren.store.message.decode_restored): a property
list stored before Warren checked lists at the edge (issue 16) is salvaged and logged, never
handed to a consumer that cannot decode it, and never lost."""

from __future__ import annotations

from warren.codec.properties import properties_error
from warren.spec.amqp0_9_1 import BasicProperties
from warren.store.message import decode_message, decode_restored, encode_message


def test_a_well_formed_record_comes_back_unchanged(caplog):
    props = BasicProperties(content_type="a/b", headers={"x": [1, "y"]}, delivery_mode=2).encode()
    record = encode_message("ex", "rk", props, b"body")
    with caplog.at_level("WARNING", logger="warren.store"):
        assert decode_restored(record) == decode_message(record) == ("ex", "rk", props, b"body")
        assert decode_restored(memoryview(record)) == ("ex", "rk", props, b"body")
    assert caplog.text == ""


def test_a_record_with_a_poisoned_headers_table_is_kept_with_an_empty_table_and_logged(caplog):
    good = BasicProperties(content_type="a/b", headers={"k": 1}, delivery_mode=2).encode()
    at = good.index(b"\x01kI")
    bad = good[:at + 2] + b"Z" + good[at + 3:]
    with caplog.at_level("WARNING", logger="warren.store"):
        exchange, routing_key, props, body = decode_restored(encode_message("ex", "rk", bad, b"body"))
    assert (exchange, routing_key, body) == ("ex", "rk", b"body")
    assert properties_error(props) is None
    p = BasicProperties.decode(props, 0)[0]
    assert (p.content_type, p.headers, p.delivery_mode) == ("a/b", {}, 2)
    assert "malformed property list" in caplog.text and "'rk'" in caplog.text


def test_a_record_with_trailing_octets_after_its_properties_is_salvaged():
    _, _, props, _ = decode_restored(encode_message("", "q", b"\x00\x00XYZ", b""))
    assert props == b"\x00\x00"
