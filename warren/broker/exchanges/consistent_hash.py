"""Consistent-hash exchange (type ``x-consistent-hash``): RabbitMQ's plugin of that name.

A binding's routing key is its weight, a decimal integer >= 1 (anything else is 406, with the
plugin's messages). Weights become buckets: the first binding owns buckets ``0 .. w1-1``, the
next the following ``w2``, and so on; unbinding removes a binding's buckets and shifts later
ones down, as the plugin does. A message goes to exactly one destination: the owner of bucket
``jump_hash(hash(value), total weight)``, so each destination gets a share proportional to its
weight, and adding a binding moves only about ``w / total`` of the keys.

The hashed value is the routing key (the first one: CC/BCC keys do not count), or, if the
exchange was declared with one of these arguments (mutually exclusive):

* ``hash-header``: the value of that message header (a message without it hashes as "absent",
  so all such messages go to one destination);
* ``hash-property``: ``message_id``, ``correlation_id`` or ``timestamp``.

The hash itself (BLAKE2b, 64 bits, then Lamping and Veach's jump consistent hash) is not
Erlang's ``phash2``, so Warren and RabbitMQ put a given key in different buckets; both
distribute the same way.
"""

from __future__ import annotations

import bisect
import hashlib
import re

from warren.broker.exchanges.base import Exchange
from warren.errors import PreconditionFailed

__all__ = ["ConsistentHashExchange", "jump_hash"]

PROPERTIES = ("correlation_id", "message_id", "timestamp")
_ABSENT = b"\x00absent"
_INTEGER = re.compile(r"[+-]?[0-9]+")


def jump_hash(key: int, buckets: int) -> int:
    """Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm" (2014)."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777866503 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b


def _hash(value) -> int:
    if value is None:
        data = _ABSENT
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        data = repr(value).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


class ConsistentHashExchange(Exchange):
    TYPE = "x-consistent-hash"

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        header = self.arguments.get("hash-header")
        prop = self.arguments.get("hash-property")
        if header is not None and prop is not None:
            raise PreconditionFailed("hash-header and hash-property are mutually exclusive")
        if header is not None and not isinstance(header, str):
            raise PreconditionFailed(f"invalid arg 'hash-header': expected a string, got {header!r}")
        if prop is not None and prop not in PROPERTIES:
            raise PreconditionFailed(f"Unsupported property: {prop}")
        self._header: str | None = header
        self._property: str | None = prop
        self._bindings: list = []  # in bucket order
        self._ends: list[int] = []  # cumulative weights: binding i owns buckets [_ends[i-1], _ends[i])

    def check_key(self, routing_key: str) -> None:
        if _INTEGER.fullmatch(routing_key) is None:  # Erlang's list_to_integer: no spaces, ASCII digits
            shown = f'<<"{routing_key}">>' if routing_key else "<<>>"  # Erlang's ~p of a binary
            raise PreconditionFailed(f"The binding key must be an integer: {shown}")
        if int(routing_key) < 1:
            raise PreconditionFailed("The binding key must be greater than 0")

    def _add(self, b) -> None:
        self._bindings.append(b)
        self._reindex()

    def _remove(self, b) -> None:
        self._bindings.remove(b)
        self._reindex()

    def _reindex(self) -> None:
        total = 0
        ends = []
        for b in self._bindings:
            total += int(b.routing_key, 10)
            ends.append(total)
        self._ends = ends

    def _value(self, routing_key: str, message):
        if self._header is not None:
            return message.headers.get(self._header)
        if self._property is not None:
            value = getattr(message.decoded, self._property)
            if self._property == "timestamp" and value is not None:
                value = str(value if isinstance(value, int) else int(value.timestamp()))
            return value
        return routing_key

    def match(self, routing_key, message):
        if not self._ends:
            return ()
        bucket = jump_hash(_hash(self._value(routing_key, message)), self._ends[-1])
        return (self._bindings[bisect.bisect_right(self._ends, bucket)].destination,)

    def match_keys(self, routing_keys, message):
        return self.match(routing_keys[0], message)
