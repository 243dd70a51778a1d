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
    # Glob-style matching with one backtrack point, the last `#` seen: when a word fails, that
    # `#` takes one more word and matching resumes after it. At most len(pat) * len(key) steps;
    # backtracking into every earlier `#` is exponential ("#.a.#.a...#.b" against "a.a...a").
    star_pi = -1
    star_ki = 0
    while ki < len(key):
        w = pat[pi] if pi < len(pat) else None
        if w == "#":
            star_pi, star_ki = pi, ki
            pi += 1
        elif w is not None and (w == "*" or w == key[ki]):
            pi += 1
            ki += 1
        elif star_pi >= 0:
            star_ki += 1
            pi, ki = star_pi + 1, star_ki
        else:
            return False
    while pi < len(pat) and pat[pi] == "#":
        pi += 1
    return pi == len(pat)


def topic_matches(pattern: str, routing_key: str) -> bool:
    """Whether a binding pattern matches a routing key (RabbitMQ semantics)."""
    return _match(_compile(pattern), 0, _words(routing_key), 0)


class TopicExchange(Exchange):
    TYPE = "topic"
    KEY_ROUTED = True

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
