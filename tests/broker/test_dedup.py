"""The deduplication cache (warren/broker/dedup.py): keys, size bound (LRU) and TTL."""

from __future__ import annotations

import pytest

from warren.broker.dedup import DEFAULT_HEADER, DedupCache, check_arguments, from_arguments
from warren.errors import PreconditionFailed


class Msg:
    def __init__(self, **headers) -> None:
        self.headers = headers


def key(v, **more) -> Msg:
    return Msg(**{DEFAULT_HEADER: v}, **more)


def test_second_message_with_a_key_is_a_duplicate():
    c = DedupCache()
    assert [c.duplicate(key("a"), 0), c.duplicate(key("a"), 0), c.duplicate(key("b"), 0)] == [False, True, False]


def test_message_without_the_header_is_never_a_duplicate_and_not_remembered():
    c = DedupCache()
    assert not c.duplicate(Msg(), 0) and not c.duplicate(Msg(), 0) and len(c) == 0


def test_least_recently_seen_key_is_forgotten_first():
    c = DedupCache(size=2)
    for v in "aba":
        c.duplicate(key(v), 0)
    c.duplicate(key("c"), 0)  # evicts b: a was seen after it
    assert c.duplicate(key("a"), 0) and not c.duplicate(key("b"), 0)


def test_ttl_and_the_message_override():
    c = DedupCache(ttl_ms=1000)
    c.duplicate(key("a"), 0.0)
    c.duplicate(key("b", **{"x-cache-ttl": 100}), 0.0)
    assert c.duplicate(key("a"), 0.5) and not c.duplicate(key("b"), 0.5)
    assert not c.duplicate(key("a"), 1.5)


def test_values_keep_their_type():
    c = DedupCache()
    c.duplicate(key(1), 0)
    assert not c.duplicate(key("1"), 0) and not c.duplicate(key(True), 0) and c.duplicate(key(1), 0)
    c.duplicate(key({"t": [1, b"x"]}), 0)
    assert c.duplicate(key({"t": [1, b"x"]}), 0)


def test_arguments():
    assert from_arguments({}) is None and from_arguments({"x-message-deduplication": False}) is None
    c = from_arguments({"x-message-deduplication": True, "x-cache-size": 5, "x-cache-ttl": 10,
                        "x-deduplication-header": "id"})
    assert (c.size, c.ttl, c.header) == (5, 0.01, "id")
    check_arguments({"x-message-deduplication": True, "x-cache-size": 1}, "queue", "q")
    with pytest.raises(PreconditionFailed):
        check_arguments({"x-message-deduplication": True, "x-cache-ttl": True}, "queue", "q")
