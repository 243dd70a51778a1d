"""Message deduplication (LavinMQ's arguments), for exchanges and queues.

Declared with ``x-message-deduplication: true`` on ``exchange.declare`` or ``queue.declare``:

* ``x-cache-size`` (integer > 0, default 128, LavinMQ's default): how many keys are remembered;
  past it the least recently seen key is forgotten.
* ``x-cache-ttl`` (integer ms >= 0, default: none): how long a key is remembered. A message may
  set its own with an integer ``x-cache-ttl`` header, as in LavinMQ.
* ``x-deduplication-header`` (string, default ``"x-deduplication-header"``, LavinMQ's
  ``DEFAULT_HEADER_KEY``): the message header whose value is the key. A message without it is
  never a duplicate.

A message whose key is remembered (and not expired) is a duplicate: an exchange routes it
nowhere (``basic.return`` NO_ROUTE when mandatory, as LavinMQ), a queue drops it. The first
message with a key is remembered whether or not it was routed. The cache lives in memory; a
durable queue's starts again, after a restart or a kill -9, with the keys of the messages it
still holds (``remember_stored``: its newest ``x-cache-size`` messages, ttl counted afresh), so
a publisher that repeats a publish whose confirm a broker crash swallowed is deduplicated; keys
of messages already consumed, and an exchange's cache, start empty.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from warren.broker.message import Message
from warren.codec.properties import DEDUPLICATION_HEADER
from warren.errors import PreconditionFailed
from warren.store.message import decode_restored

__all__ = ["DedupCache", "DEFAULT_HEADER", "DEFAULT_SIZE", "check_arguments", "from_arguments",
           "queue_duplicate", "remember_stored"]

DEFAULT_HEADER = DEDUPLICATION_HEADER
DEFAULT_SIZE = 128


def _freeze(v):
    """A hashable key for a field value that keeps its type class (1 and "1" differ)."""
    if isinstance(v, dict):
        return ("F", tuple(sorted((k, _freeze(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("A", tuple(_freeze(x) for x in v))
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ("s", bytes(v))
    if isinstance(v, str):
        return ("s", v.encode("utf-8", "surrogateescape"))
    return (type(v).__name__, v)


class DedupCache:
    """A bounded least-recently-seen cache of message keys, each with an optional expiry."""

    __slots__ = ("size", "ttl", "header", "_keys")

    def __init__(self, size: int = DEFAULT_SIZE, ttl_ms: int | None = None, header: str = DEFAULT_HEADER) -> None:
        self.size = size
        self.ttl = ttl_ms / 1000 if ttl_ms is not None else None
        self.header = header
        self._keys: OrderedDict = OrderedDict()  # key -> monotonic expiry or None

    def __len__(self) -> int:
        return len(self._keys)

    def duplicate(self, message, now: float | None = None) -> bool:
        """Whether ``message`` repeats a remembered key; remembers its key if not."""
        headers = message.headers
        if self.header not in headers:
            return False
        key = _freeze(headers[self.header])
        keys = self._keys
        if now is None:
            now = time.monotonic()
        if key in keys:
            expiry = keys[key]
            if expiry is None or expiry > now:
                keys.move_to_end(key)
                return True
            del keys[key]
        ttl = self.ttl
        own = headers.get("x-cache-ttl")
        if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
            ttl = own / 1000
        while len(keys) >= self.size:
            keys.popitem(last=False)
        keys[key] = now + ttl if ttl is not None else None
        return False


def check_arguments(arguments: dict, kind: str, name: str) -> None:
    """406 for deduplication arguments of the wrong type or range (LavinMQ's checks)."""
    on = arguments.get("x-message-deduplication")
    if on is None:
        return
    if not isinstance(on, bool):
        raise PreconditionFailed(f"invalid arg 'x-message-deduplication' for {kind} '{name}': "
                                 f"expected a boolean, got {on!r}")
    for key, low in (("x-cache-size", 1), ("x-cache-ttl", 0)):
        v = arguments.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
            raise PreconditionFailed(f"invalid arg '{key}' for {kind} '{name}': expected an integer "
                                     f">= {low}, got {v!r}")
    header = arguments.get("x-deduplication-header")
    if header is not None and not isinstance(header, str):
        raise PreconditionFailed(f"invalid arg 'x-deduplication-header' for {kind} '{name}': "
                                 f"expected a string, got {header!r}")


def from_arguments(arguments: dict) -> DedupCache | None:
    """The cache the arguments ask for (already checked), or None when deduplication is off."""
    if arguments.get("x-message-deduplication") is not True:
        return None
    size, ttl, header = (arguments.get(k) for k in ("x-cache-size", "x-cache-ttl", "x-deduplication-header"))
    return DedupCache(size if _int(size) and size > 0 else DEFAULT_SIZE, ttl if _int(ttl) and ttl >= 0 else None,
                      header if isinstance(header, str) and header else DEFAULT_HEADER)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def queue_duplicate(queue, message) -> bool:
    """Queue.publish's hook: whether ``message`` is a duplicate for this deduplicating queue."""
    cache = queue.__dict__.get("dedup", _UNSET)
    if cache is _UNSET:
        cache = queue.dedup = from_arguments(queue.effective)
    return cache is not None and cache.duplicate(message)


def remember_stored(queue) -> int:
    """Start-up of a durable deduplicating queue: put the keys of the messages its store still
    holds (the newest ``x-cache-size``, oldest first, paged ones included) into its cache, as if
    they had just been published. Without it a crash would empty the cache while the messages
    stay, and the repeat of a publish whose confirm the crash swallowed (what an exactly-once
    writer sends: warren/spark/write/writer.py) would be queued twice. Returns the keys read."""
    cache = queue.__dict__.get("dedup", _UNSET)
    if cache is _UNSET:
        cache = queue.dedup = from_arguments(queue.effective)
    store = queue.store
    if cache is None or store is None or not len(store):
        return 0
    entries = store.unacked_after(0, len(store))[-cache.size:]
    for seq, _delivered in entries:
        cache.duplicate(Message(*decode_restored(store.read(seq))))
    return len(entries)


_UNSET = object()
