"""RabbitMQ's topic matching, recorded case by case from RabbitMQ 3.10.

Shared by the unit tests of the matcher (tests/broker/test_topic.py) and the end-to-end routing
tests (tests/e2e/test_routing.py), which also run against RabbitMQ itself.
"""

from __future__ import annotations

TOPIC_KEYS = ["", "a", "b", "a.b", "a.b.c", "a.x.b", "a.x.y.b", "a..b", ".", "..", "a.", ".a",
              "b.a", "x.a.y", "a.b.b", "A.b"]

# pattern -> the keys of TOPIC_KEYS it matches, exactly as RabbitMQ 3.10 routes them.
# RabbitMQ splits a routing key on "." keeping empty words ("a..b" is a, "", b; "." is two
# empty words) except that the empty key "" has *no* words: "*" does not match it, "#" does.
TOPIC_TABLE: dict[str, list[str]] = {
    "#": TOPIC_KEYS,
    "#.#": TOPIC_KEYS,
    "*": ["a", "b"],
    "": [""],
    "a.b": ["a.b"],
    "a.*": ["a.b", "a."],
    "*.b": ["a.b", "A.b"],
    "a.#": ["a", "a.b", "a.b.c", "a.x.b", "a.x.y.b", "a..b", "a.", "a.b.b"],
    "#.b": ["b", "a.b", "a.x.b", "a.x.y.b", "a..b", "a.b.b", "A.b"],
    "#.a": ["a", ".a", "b.a"],
    "a.#.b": ["a.b", "a.x.b", "a.x.y.b", "a..b", "a.b.b"],
    "a.#.#.b": ["a.b", "a.x.b", "a.x.y.b", "a..b", "a.b.b"],
    "a.*.b": ["a.x.b", "a..b", "a.b.b"],
    "a.#.*.b": ["a.x.b", "a.x.y.b", "a..b", "a.b.b"],
    "a.*.#": ["a.b", "a.b.c", "a.x.b", "a.x.y.b", "a..b", "a.", "a.b.b"],
    "a..b": ["a..b"],
    "a.*.*": ["a.b.c", "a.x.b", "a..b", "a.b.b"],
    "*.*": ["a.b", ".", "a.", ".a", "b.a", "A.b"],
    "*.*.*": ["a.b.c", "a.x.b", "a..b", "..", "x.a.y", "a.b.b"],
    "#.*": [k for k in TOPIC_KEYS if k != ""],
    "*.#": [k for k in TOPIC_KEYS if k != ""],
    "#.a.#": ["a", "a.b", "a.b.c", "a.x.b", "a.x.y.b", "a..b", "a.", ".a", "b.a", "x.a.y", "a.b.b"],
    ".": ["."],
    "*.": [".", "a."],
    ".*": [".", ".a"],
}
