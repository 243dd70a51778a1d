"""The delayed-message exchange model (warren/broker/exchanges/delayed_message.py), no broker."""

from __future__ import annotations

import decimal

import pytest

from warren.broker.exchanges.delayed_message import MAX_DELAY_MS, DelayedMessageExchange, _decode, _encode, delay_of
from warren.broker.message import Message
from warren.errors import CommandInvalid, PreconditionFailed
from warren.spec.amqp0_9_1 import BasicProperties

from .helpers import Dest


def msg(**headers) -> Message:
    return Message("x", "k", BasicProperties(headers=headers or None, delivery_mode=2).encode(), b"body")


@pytest.mark.parametrize("value,expected", [
    (500, 500), ("500", 500), (decimal.Decimal("12.9"), 12), (MAX_DELAY_MS, MAX_DELAY_MS),
    (0, None), (-5, None), (True, None), ("x", None), (MAX_DELAY_MS + 1, None), ([1], None),
])
def test_delay_of(value, expected):
    assert delay_of(msg(**{"x-delay": value})) == expected


def test_no_headers_no_delay():
    assert delay_of(msg()) is None and delay_of(msg(other=1)) is None


def test_record_round_trip():
    m = msg(**{"x-delay": -5})
    due, keys, back = _decode(_encode(123456789, ("k", "cc-é"), m.record))
    assert (due, keys, back.exchange, back.routing_key, back.properties, back.body) == (
        123456789, ("k", "cc-é"), "x", "k", m.properties, b"body")


def test_hold_and_tick_without_a_vhost():
    x = DelayedMessageExchange("d", arguments={"x-delayed-type": "direct"})
    q = Dest("q")
    got = []
    q.publish = lambda m: got.append(m) or 0
    x.bind(q, "k", {})
    [hold] = x.match("k", msg(**{"x-delay": 100}))
    assert hold.publish(msg(**{"x-delay": 100})) == 0 and x.held == 1
    assert x.tick(0.0) is True and not got  # now=0: before any due time
    assert x.tick(1e12) is False and len(got) == 1
    assert got[0].headers == {"x-delay": -100}
    assert x.match("k", got[0]) == [q]


def test_declare_checks():
    with pytest.raises(PreconditionFailed):
        DelayedMessageExchange("d")
    with pytest.raises(CommandInvalid):
        DelayedMessageExchange("d", arguments={"x-delayed-type": "x-delayed-message"})
