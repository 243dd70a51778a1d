"""Topic exchange: dot-separated words; in a binding key `*` is one word and `#` zero or more.

Matching is RabbitMQ's: words may be empty ("a..b" has three words), but an empty key or
pattern has no words at all (so `*` does not match "", and `#` does),
`#` may match nothing, including at the start or end ("#.a" matches "a"), and several `#` in a
row act as one. A binding key is compiled once into a word list and matched with a small
backtracking matcher; results for a routing key are cached until the bindings change, since
publishers reuse a handful of keys.
"""

from __future__ import annotations

from functools import lru_cache

from warren.broker.exchanges.base import Exchange

__all__ = ["TopicExchange", "topic_matches"]

_CACHE_SIZE = 4096


@lru_cache(maxsize=_CACHE_SIZE)
def _compile(pattern: str) -> tuple[str, ...]:
    words: list[str] = []
    for w in _words(pattern):
        if w == "#" and words and words[-1] == "#":
            continue  # "#.#" is the same as "#"
        words.append(w)
    return tuple(words)


def _words(key: str) -> list[str]:
    return key.split(".") if key else []


def _match(pat: tuple, pi: int, key: list, ki: int) -> bool:
    # iterative over `*` and literal words, recursive only at `#`
    while pi < len(pat):
        w = pat[pi]
        if w == "#":
            if pi == len(pat) - 1:
                return True
            for k in range(ki, len(key) + 1):
                if _match(pat, pi + 1, key, k):
                    return True
            return False
        if ki >= len(key):
            return False
        if w != "*" and w != key[ki]:
            return False
        pi += 1
        ki += 1
    return ki == len(key)


def topic_matches(pattern: str, routing_key: str) -> bool:
    """Whether a binding pattern matches a routing key (RabbitMQ semantics)."""
    return _match(_compile(pattern), 0, _words(routing_key), 0)


class TopicExchange(Exchange):
    TYPE = "topic"

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._patterns: dict[str, list] = {}  # pattern -> destinations
        self._cache: dict[str, list] = {}

    def _add(self, b) -> None:
        self._patterns.setdefault(b.routing_key, []).append(b.destination)
        self._cache.clear()

    def _remove(self, b) -> None:
        dests = self._patterns.get(b.routing_key)
        if dests is not None:
            dests.remove(b.destination)
            if not dests:
                del self._patterns[b.routing_key]
        self._cache.clear()

    def match(self, routing_key, message):
        hit = self._cache.get(routing_key)
        if hit is None:
            words = _words(routing_key)
            hit = []
            for pattern, dests in self._patterns.items():
                if _match(_compile(pattern), 0, words, 0):
                    hit.extend(dests)
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[routing_key] = hit
        return hit
