"""The consistent-hash exchange model (warren/broker/exchanges/consistent_hash.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from warren.broker.exchanges.consistent_hash import ConsistentHashExchange, jump_hash
from warren.errors import PreconditionFailed

from .helpers import Dest


class Msg:
    headers: dict = {}


def test_jump_hash_moves_keys_only_to_new_buckets():
    for key in range(2000):
        before = jump_hash(key * 7919, 10)
        after = jump_hash(key * 7919, 11)
        assert 0 <= before < 10 and after in (before, 10)


def test_shares_follow_weights_and_unbinding_shifts_buckets():
    x = ConsistentHashExchange("x")
    a, b, c = Dest("a"), Dest("b"), Dest("c")
    x.bind(a, "1", {})
    x.bind(b, "3", {})
    got = Counter(x.match(f"k{i}", Msg())[0].name for i in range(4000))
    assert abs(got["a"] / 4000 - 0.25) < 0.04 and got["a"] + got["b"] == 4000
    x.bind(c, "4", {})
    x.unbind(b, "3", {})
    got = Counter(x.match(f"k{i}", Msg())[0].name for i in range(4000))
    assert set(got) == {"a", "c"} and abs(got["a"] / 4000 - 0.2) < 0.04


@pytest.mark.parametrize("key", ["", "x", "0", "-1", "1.5", " 5", "\u0665"])
def test_weight_must_be_a_positive_integer(key):
    with pytest.raises(PreconditionFailed):
        ConsistentHashExchange("x").bind(Dest("q"), key, {})


def test_no_bindings_no_destination():
    assert ConsistentHashExchange("x").match("k", Msg()) == ()
