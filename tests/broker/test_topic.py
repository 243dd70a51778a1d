"""Topic matching (warren.broker.exchanges.topic): RabbitMQ's semantics, checked against a table
recorded from RabbitMQ and against a small regex reference implementation."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings, strategies as st

from warren.broker.exchanges.topic import TopicExchange, topic_matches

from ..topic_cases import TOPIC_KEYS
from ..topic_cases import TOPIC_TABLE as RABBITMQ_TABLE
from .helpers import Dest


def words(key: str) -> list[str]:
    """RabbitMQ's split: on every dot, keeping empty words, except that "" has no words at all."""
    return key.split(".") if key else []


def reference_matches(pattern: str, key: str) -> bool:
    """Regex reference: each word is written as "." + word, so "" is the empty string, "a..b" is
    ".a..b" (three words) and "#" is any number of whole words, including none."""
    regex = "".join(
        r"(?:\.[^.]*)*" if w == "#" else r"\.[^.]*" if w == "*" else re.escape("." + w)
        for w in words(pattern)
    )
    subject = "".join("." + w for w in words(key))
    return re.fullmatch(regex, subject) is not None


# --- RabbitMQ's answers (tests/topic_cases.py, shared with tests/e2e/test_routing.py) ----------

@pytest.mark.parametrize("pattern", list(RABBITMQ_TABLE), ids=repr)
def test_a_pattern_matches_exactly_the_keys_rabbitmq_matches(pattern):
    assert [k for k in TOPIC_KEYS if topic_matches(pattern, k)] == RABBITMQ_TABLE[pattern]


@pytest.mark.parametrize("pattern", list(RABBITMQ_TABLE), ids=repr)
def test_the_reference_implementation_agrees_with_rabbitmq(pattern):
    assert [k for k in TOPIC_KEYS if reference_matches(pattern, k)] == RABBITMQ_TABLE[pattern]


# --- named rules -------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern,key,expected", [
    ("a.#", "a", True),
    ("a.#", "a.b.c", True),
    ("a.#", "b.a", False),
    ("#.a", "a", True),
    ("#.a", "x.y.a", True),
    ("#.a", "a.x", False),
    ("#", "", True),
    ("#", "a.b.c.d.e", True),
    ("*", "", False),  # "" has no words
    ("*", "a.b", False),
    ("*", ".", False),  # "." is two empty words
    ("*.*", ".", True),
    ("a.*.b", "a..b", True),  # "a..b" has three words, the middle one empty
    ("a.b", "a..b", False),
    ("*.*.*", "a..b", True),
    ("a.#.b", "a.b", True),  # "#" may match no word in the middle
    ("a.*.#.*.b", "a.x.y.b", True),
    ("a.*.#.*.b", "a.x.b", False),
    ("a#.b", "ax.b", False),  # "#" and "*" are special only as whole words
    ("a#.b", "a#.b", True),
    ("*a", "ba", False),
    ("*a", "*a", True),
    ("A.b", "a.b", False),  # case matters
    ("#.#.#", "", True),
    ("#.#.a.#.#", "a", True),
])
def test_each_named_topic_rule_holds(pattern, key, expected):
    assert topic_matches(pattern, key) is expected
    assert reference_matches(pattern, key) is expected


# --- properties against the reference ------------------------------------------------------

word = st.sampled_from(["a", "b", "", "ab"])
pattern_word = st.sampled_from(["a", "b", "", "*", "#", "#", "a*", "#b"])
keys = st.lists(word, max_size=6).map(".".join)
patterns = st.lists(pattern_word, max_size=6).map(".".join)


@settings(max_examples=400)
@given(patterns, keys)
def test_topic_matches_agrees_with_the_regex_reference(pattern, key):
    assert topic_matches(pattern, key) is reference_matches(pattern, key)


@settings(max_examples=200)
@given(st.lists(pattern_word, max_size=6).map(".".join))
def test_a_pattern_matches_itself_as_a_key(pattern):
    assert topic_matches(pattern, pattern)


@settings(max_examples=200)
@given(keys, keys)
def test_a_literal_pattern_matches_only_the_identical_key(pattern, key):
    assert topic_matches(pattern, key) is (pattern == key)


@settings(max_examples=200)
@given(keys)
def test_hash_matches_every_key(key):
    assert topic_matches("#", key)
    assert topic_matches("#.#", key)


@settings(max_examples=200)
@given(keys)
def test_star_matches_exactly_the_keys_of_one_word(key):
    assert topic_matches("*", key) is (len(words(key)) == 1)


@settings(max_examples=200)
@given(st.integers(0, 5), keys)
def test_n_stars_match_exactly_the_keys_of_n_words(n, key):
    pattern = ".".join(["*"] * n)
    assert topic_matches(pattern, key) is (len(words(key)) == n)


@settings(max_examples=200)
@given(st.lists(pattern_word, min_size=1, max_size=4), st.lists(pattern_word, max_size=4), keys)
def test_hash_hash_is_the_same_as_hash_anywhere_in_a_pattern(before, after, key):
    with_two = ".".join(before + ["#", "#"] + after)
    with_one = ".".join(before + ["#"] + after)
    assert topic_matches(with_two, key) is topic_matches(with_one, key)


@settings(max_examples=200)
@given(keys, keys)
def test_a_prefix_then_hash_matches_the_prefix_and_anything_after_it(prefix, rest):
    if not prefix:
        return
    assert topic_matches(prefix + ".#", prefix)
    if rest:
        assert topic_matches(prefix + ".#", prefix + "." + rest)


def test_many_hashes_against_a_long_key_do_not_take_exponential_time():
    pattern = ".".join(["#", "a"] * 8) + ".b"  # eight "#" and a last word that never matches
    key = ".".join(["a"] * 127)  # the longest key a 255-octet shortstr can hold
    t0 = time.perf_counter()
    assert topic_matches(pattern, key) is False
    assert topic_matches(pattern, key + ".b") is True
    assert time.perf_counter() - t0 < 1.0


# --- the exchange --------------------------------------------------------------------------

def test_the_exchange_routes_by_pattern_and_forgets_cached_results_when_bindings_change():
    ex = TopicExchange("t")
    q1, q2 = Dest("q1"), Dest("q2")
    assert ex.bind(q1, "stock.#", {})
    assert not ex.bind(q1, "stock.#", {})  # the same binding twice is one binding
    assert ex.match("stock.nyse", None) == [q1]
    assert ex.bind(q2, "*.nyse", {})
    assert sorted(ex.match("stock.nyse", None), key=repr) == [q1, q2]
    assert ex.unbind(q1, "stock.#", {})
    assert ex.match("stock.nyse", None) == [q2]
    assert ex.match("", None) == []


def test_the_exchange_agrees_with_topic_matches_for_the_empty_key():
    ex = TopicExchange("t")
    star, hash_, empty = Dest("star"), Dest("hash"), Dest("empty")
    ex.bind(star, "*", {})
    ex.bind(hash_, "#", {})
    ex.bind(empty, "", {})
    assert sorted(ex.match("", None), key=repr) == [empty, hash_]
    assert sorted(ex.match("x", None), key=repr) == [hash_, star]
