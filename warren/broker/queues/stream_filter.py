"""Stream filtering, as RabbitMQ 3.13's over AMQP 0-9-1: a per-block Bloom filter of filter values.

A publisher tags a message with the header ``x-stream-filter-value`` (a string). A consumer of
the stream asks for some values with the consume argument ``x-stream-filter`` (a string, or an
array of strings: any of them), and with ``x-stream-match-unfiltered: true`` also for the
messages that carry no value. RabbitMQ keeps a Bloom filter of the values in each chunk's header
and skips a chunk that cannot hold a wanted value (it is never read from disk nor sent).

Warren's stream log has no chunks, so this module keeps the same thing beside it, in memory:
the offsets are cut into blocks of ``BLOCK`` consecutive offsets, and each block has a Bloom
filter (an integer of ``x-stream-filter-size-bytes`` × 8 bits, RabbitMQ's argument: 16 to 255
octets, default 16) of the values its messages carry, plus a flag saying whether one of them
carries none. ``StreamQueue.publish`` adds every message (``add``); a filtered consumer's
``_feed`` asks ``candidates`` for the next run of blocks that may match and reads only those.

Differences from RabbitMQ, both on the safe side for a client that filters again, as RabbitMQ
asks its clients to: Warren delivers only the messages that match (RabbitMQ's 0-9-1 path sends
every message of a chunk that may match, false positives included), and blocks written before a
restart have no filter (it is kept in memory only), so they are read and checked message by
message, never skipped. A value that is not a string (an integer header) counts as no value.
"""

from __future__ import annotations

import hashlib

from warren.errors import PreconditionFailed

__all__ = ["BLOCK", "FILTER_HEADER", "ConsumerFilter", "FilterIndex", "FilteredRecords", "consumer_filter",
           "filter_size", "message_filter_value", "records_filter"]

FILTER_HEADER = "x-stream-filter-value"
_FILTER_HEADER_OCTETS = FILTER_HEADER.encode()
BLOCK = 128  # offsets per block: RabbitMQ's chunks hold what one write batch brought, often about this
DEFAULT_SIZE, MIN_SIZE, MAX_SIZE = 16, 16, 255  # x-stream-filter-size-bytes, RabbitMQ's default and range
HASHES = 3  # bit positions per value: for 16 octets and a few values per block, few false positives
KEY_BITS = 256  # the routing keys' Bloom filter of a block (the records endpoint's routing_key filter)


def filter_size(effective: dict) -> int:
    """The Bloom filter's octets from ``x-stream-filter-size-bytes`` (declared or a policy's)."""
    v = effective.get("x-stream-filter-size-bytes")
    if isinstance(v, int) and not isinstance(v, bool):
        return min(max(v, MIN_SIZE), MAX_SIZE)
    return DEFAULT_SIZE


def _mask(value: str, bits: int) -> int:
    # blake2b rather than hash(): the same bits in every process (str hashes are salted)
    d = hashlib.blake2b(value.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    h1, h2 = int.from_bytes(d[:4], "big"), int.from_bytes(d[4:], "big") | 1
    mask = 0
    for i in range(HASHES):
        mask |= 1 << ((h1 + i * h2) % bits)
    return mask


def message_filter_value(message) -> str | None:
    """The message's ``x-stream-filter-value`` if it is a string; None without one. The
    properties are decoded only when their octets contain the header's name."""
    props = message.properties
    if not props or _FILTER_HEADER_OCTETS not in props:
        return None
    v = message.headers.get(FILTER_HEADER)
    return v if isinstance(v, str) else None


class ConsumerFilter:
    """What one reader asked for: filter values (their masks, and whether unfiltered messages
    match), and for the HTTP records endpoint routing keys (``keys``: Warren's own, no AMQP
    argument asks for them); a block may match when it may hold a wanted value (if values are
    asked for) and a wanted routing key (if keys are)."""

    __slots__ = ("values", "masks", "match_unfiltered", "keys", "key_masks")

    def __init__(self, values: frozenset, match_unfiltered: bool, bits: int, keys: frozenset = frozenset()) -> None:
        self.values = values
        self.masks = tuple(_mask(v, bits) for v in values)
        self.match_unfiltered = match_unfiltered
        self.keys = keys
        self.key_masks = tuple(_mask(k, KEY_BITS) for k in keys)

    def matches(self, value: str | None) -> bool:
        return (value in self.values) if value is not None else self.match_unfiltered


def consumer_filter(where: str, arguments: dict | None, bits: int) -> ConsumerFilter | None:
    """The consumer's filter from its ``x-stream-filter`` / ``x-stream-match-unfiltered``
    arguments (406 naming the argument when one is of the wrong type); None without a filter."""
    if not arguments or "x-stream-filter" not in arguments:
        return None
    raw = arguments["x-stream-filter"]
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise PreconditionFailed(f"invalid arg 'x-stream-filter' for {where}: expected a string or a non-empty "
                                 f"array of strings, got {raw!r}")
    unfiltered = arguments.get("x-stream-match-unfiltered", False)
    if not isinstance(unfiltered, bool):
        raise PreconditionFailed(f"invalid arg 'x-stream-match-unfiltered' for {where}: expected a boolean, "
                                 f"got {unfiltered!r}")
    return ConsumerFilter(frozenset(values), unfiltered, bits)


class FilterIndex:
    """The Bloom filter of each block of offsets of one stream, from ``first_known`` on (the
    blocks before it, written before this broker started, are unknown: they may match)."""

    __slots__ = ("bits", "first_known", "blooms", "unfiltered", "key_blooms", "_last_unfiltered", "_masks",
                 "_key_masks", "_last_key")

    def __init__(self, size_bytes: int, next_offset: int) -> None:
        self.bits = size_bytes * 8
        # a block already begun when the index starts has messages it never saw
        self.first_known = -(-next_offset // BLOCK)
        self.blooms: dict[int, int] = {}  # block -> Bloom bits of its values
        self.unfiltered: set[int] = set()  # blocks with a message that carries no value
        self._last_unfiltered = -1
        self._masks: dict[str, int] = {}  # value -> mask, for publishers that repeat a few values
        self.key_blooms: dict[int, int] = {}  # block -> Bloom bits (KEY_BITS) of its routing keys
        self._key_masks: dict[str, int] = {}
        self._last_key: tuple = (-1, None)  # (block, routing key) last added: runs of one key cost a compare

    def add(self, offset: int, value: str | None, routing_key: str | None = None) -> None:
        block = offset // BLOCK
        if routing_key is not None and (block, routing_key) != self._last_key:
            self._last_key = (block, routing_key)
            kmasks = self._key_masks
            kmask = kmasks.get(routing_key)
            if kmask is None:
                if len(kmasks) >= 4096:
                    kmasks.clear()
                kmask = kmasks[routing_key] = _mask(routing_key, KEY_BITS)
            self.key_blooms[block] = self.key_blooms.get(block, 0) | kmask
        if value is None:
            if block != self._last_unfiltered:  # the common case, one comparison per message
                self._last_unfiltered = block
                self.unfiltered.add(block)
            return
        masks = self._masks
        mask = masks.get(value)
        if mask is None:
            if len(masks) >= 4096:
                masks.clear()
            mask = masks[value] = _mask(value, self.bits)
        self.blooms[block] = self.blooms.get(block, 0) | mask

    def may_match(self, block: int, want: ConsumerFilter) -> bool:
        if block < self.first_known:
            return True
        if want.key_masks:
            keys = self.key_blooms.get(block, 0)
            if not any(keys & m == m for m in want.key_masks):
                return False
            if not want.masks:
                return True
        if want.match_unfiltered and block in self.unfiltered:
            return True
        bloom = self.blooms.get(block, 0)
        return any(bloom & m == m for m in want.masks)

    def candidates(self, cursor: int, last: int, want: ConsumerFilter) -> tuple[int, int]:
        """(start, end): the first offset at or after ``cursor`` (up to ``last``, inclusive)
        whose block may match, and the end (exclusive) of the run of blocks from there that
        may match; ``start > last`` when no block up to ``last`` may."""
        block, last_block = cursor // BLOCK, last // BLOCK
        while block <= last_block and not self.may_match(block, want):
            block += 1
        if block > last_block:
            return last + 1, last + 1
        start = max(cursor, block * BLOCK)
        end_block = block + 1
        while end_block <= last_block and self.may_match(end_block, want):
            end_block += 1
        return start, min(end_block * BLOCK, last + 1)

    def forget_before(self, offset: int) -> None:
        """Retention removed the offsets below ``offset``: drop the blocks wholly below it."""
        block = offset // BLOCK
        for blooms in (self.blooms, self.key_blooms):
            for b in [b for b in blooms if b < block]:
                del blooms[b]
        self.unfiltered = {b for b in self.unfiltered if b >= block}


class FilteredRecords:
    """The store as the HTTP records endpoint reads it for a request that names filter values
    (``StreamQueue.bulk_view``): ``read_raw`` gives only the entries of the blocks that may
    match, whole (block granularity, as RabbitMQ's chunks: the reader checks each row again),
    joined from as many runs as ``max_records``/``max_bytes`` allow; blocks that cannot match
    are neither read nor sent. Everything else is the store's.

    The endpoint announces ``first + count`` as the next offset to ask for, and a filtered
    answer's records are not consecutive, so it reports ``first = next - count``: the offset
    after the last block looked at (read or skipped), less the records sent."""

    __slots__ = ("_store", "_index", "_want")

    def __init__(self, store, index: FilterIndex, want: ConsumerFilter) -> None:
        self._store = store
        self._index = index
        self._want = want

    def __getattr__(self, name):
        return getattr(self._store, name)

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None):
        store = self._store
        last = store.committed_offset if end is None else min(end - 1, store.committed_offset)
        cursor = max(offset, store.first_offset)
        parts, sent, budget = [], 0, max_bytes
        while cursor <= last and sent < max_records and budget > 0:
            start, stop = self._index.candidates(cursor, last, self._want)
            if start > last:
                cursor = last + 1
                break
            first, count, data = store.read_raw(start, min(max_records - sent, stop - start), budget, stop)
            if not count:  # retention passed it meanwhile: nothing more at or after start
                cursor = max(first, start)
                break
            parts.append(data)
            sent += count
            budget -= len(data)
            cursor = first + count
        return cursor - sent, sent, b"".join(parts) if len(parts) != 1 else parts[0]


def _all(query, name: str) -> list[str]:
    getall = getattr(query, "getall", None)  # aiohttp's MultiDict; a plain dict holds one value
    return getall(name, []) if getall is not None else ([query[name]] if name in query else [])


def records_filter(query, bits: int) -> ConsumerFilter | None:
    """The filter a records request asks for: ``filter`` values (repeatable) with
    ``match_unfiltered`` (``true``/``false``), as a consumer's ``x-stream-filter`` /
    ``x-stream-match-unfiltered``, and ``routing_key`` values (repeatable); None without either.
    A wrong ``match_unfiltered`` raises ValueError naming it."""
    values, keys = _all(query, "filter"), _all(query, "routing_key")
    if not values and not keys:
        return None
    raw = query.get("match_unfiltered", "false")
    if raw not in ("true", "false"):
        raise ValueError(f"match_unfiltered must be true or false, not {raw!r}")
    # keys alone: any filter value (or none) may come
    return ConsumerFilter(frozenset(values), raw == "true" or not values, bits, frozenset(keys))
