"""Shovel definitions validated with RabbitMQ's keys and defaults (warren/federation/shovel.py)."""

import pytest

from warren.federation.shovel import ShovelError, validate

BASE = {"src-uri": "amqp://", "src-queue": "q", "dest-uri": "amqp://h"}


def test_defaults():
    d = validate(BASE)
    assert d.ack_mode == "on-confirm" and d.prefetch == 1000 and d.delete_after == "never"
    assert d.reconnect_delay == 5 and not d.forward_headers and not d.timestamp_header
    assert d.dest_queue is None and d.dest_exchange is None


def test_exchange_source_and_aliases():
    d = validate({"src-uri": ["amqp://a", "amqp://b"], "src-exchange": "x", "dest-uri": "amqp://",
                  "dest-exchange": "y", "prefetch-count": 5, "add-forward-headers": True, "delete-after": 3})
    assert d.src_exchange_key == "#" and d.prefetch == 5 and d.forward_headers and d.delete_after == 3
    assert [e.host for e in d.src_uris] == ["a", "b"]


@pytest.mark.parametrize("change,word", [
    ({"src-protocol": "amqp10"}, "not supported"),
    ({"dest-protocol": "stomp"}, "dest-protocol"),
    ({"src-exchange": "x"}, "both"),
    ({"dest-queue": "a", "dest-exchange": "b"}, "both"),
    ({"ack-mode": "later"}, "ack-mode"),
    ({"src-prefetch-count": 0}, "src-prefetch-count"),
    ({"src-delete-after": -1}, "src-delete-after"),
    ({"dest-add-forward-headers": "yes"}, "dest-add-forward-headers"),
    ({"reconnect-delay": -2}, "reconnect-delay"),
    ({"surprise": 1}, "Unrecognised"),
    ({"dest-queue": "a", "dest-exchange-key": "k"}, "dest-exchange-key"),
])
def test_refused(change, word):
    with pytest.raises(ShovelError) as e:
        validate({**BASE, **change})
    assert word in str(e.value)


def test_missing_parts():
    with pytest.raises(ShovelError, match="src-uri"):
        validate({"src-queue": "q", "dest-uri": "amqp://"})
    with pytest.raises(ShovelError, match="src-queue or src-exchange"):
        validate({"src-uri": "amqp://", "dest-uri": "amqp://"})
    with pytest.raises(ShovelError):
        validate([1, 2])
