"""Encoded AMQP basic property lists to the ``headers`` and ``properties`` columns.

Both read paths (the HTTP bulk path, which sees the property list exactly as the publisher
encoded it, and the AMQP path, which sees it with the broker's ``x-stream-offset`` header
spliced in) decode with Warren's own decoder (``BasicProperties.decode``) and render values
here, so the same message gives the same row whichever way it was read.

Most streams repeat a handful of property lists (same content type, same delivery mode, same
application headers), so decoding is per distinct encoded list, not per message: ``decode``
keeps a bounded cache keyed by the octets, and the bulk parser asks once per distinct list
of a batch (``records.py``).

Header values are rendered as text by ``warren/codec/render.py`` (the column is
``map<string,string>``, or a struct of named headers): strings as they are, numbers in
decimal, timestamps ISO 8601 UTC, nested tables and arrays as compact JSON, invalid UTF-8 as
U+FFFD. The broker's records endpoint renders with the same function when it filters on a
header, so a filter pushed down keeps exactly the rows Spark would.

The ``x-stream-offset`` header is dropped (the ``offset`` column says it), and a headers table
left empty is null, so a message published without headers reads the same over HTTP and over
AMQP, where the broker adds that header to every delivery.
"""

from __future__ import annotations

import struct

from warren.codec.properties import HEADERS_FLAG, STREAM_OFFSET_HEADER
from warren.codec.property_edits import headers_span, remove_header
from warren.spec.fields import decode_table
from warren.codec.render import render_value, valid_text as _text
from warren.spark.schema import PROPERTY_FIELDS
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = [
    "OFFSET_HEADER", "EMPTY_PROPERTIES", "MAX_TIMESTAMP_S", "decode", "decode_headers", "render_value",
    "strip_offset_header", "clear_cache",
]

OFFSET_HEADER = STREAM_OFFSET_HEADER
CACHE_LIMIT = 4096  # distinct property lists remembered; cleared when full (see decode)

_OFFSET_ENTRY_HEAD = b"\x0f" + OFFSET_HEADER.encode() + b"l"  # key shortstr + the int64 tag
_OFFSET_ENTRY_SIZE = len(_OFFSET_ENTRY_HEAD) + 8
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_PROPERTY_NAMES = tuple(name for name, _ in PROPERTY_FIELDS)
_TIMESTAMP_INDEX = _PROPERTY_NAMES.index("timestamp")
# 9999-12-31T23:59:59Z: Spark's timestamp range, and what Python (collect, toPandas) can hold
MAX_TIMESTAMP_S = 253_402_300_799
EMPTY_PROPERTIES = (None, (None,) * len(_PROPERTY_NAMES))

_cache: dict[bytes, tuple] = {}
_table_cache: dict[bytes, list | None] = {}


def clear_cache() -> None:
    _cache.clear()
    _table_cache.clear()


def _headers(table: dict | None) -> list[tuple[str, str | None]] | None:
    if not table:
        return None
    items = [(_text(k), render_value(v)) for k, v in table.items() if k != OFFSET_HEADER]
    return items or None


def _decode_uncached(raw: bytes) -> tuple:
    if len(raw) < 2:
        return EMPTY_PROPERTIES
    p, _ = BasicProperties.decode(raw, 0)
    values = []
    for name in _PROPERTY_NAMES:
        v = getattr(p, name)
        if isinstance(v, str):
            v = _text(v)
        values.append(v)
    ts = values[_TIMESTAMP_INDEX]
    # a timestamp after year 9999 is null, not an error (the wire allows any uint64)
    values[_TIMESTAMP_INDEX] = ts * 1_000_000 if ts is not None and ts <= MAX_TIMESTAMP_S else None
    return _headers(p.headers), tuple(values)


def decode(raw: bytes) -> tuple:
    """(header items or None, property values) of an encoded basic property list.

    Header items are (name, rendered value) pairs in wire order; property values follow
    ``PROPERTY_FIELDS``, the timestamp in microseconds since the epoch. ValueError if the list
    is damaged. Cached by ``raw``: the cache is simply emptied when it reaches
    ``CACHE_LIMIT`` distinct lists (a stream whose lists are all different gains nothing from
    it and must not grow it without bound).
    """
    hit = _cache.get(raw)
    if hit is not None:
        return hit
    try:
        decoded = _decode_uncached(raw)
    except (IndexError, struct.error, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"damaged property list ({e})") from None
    return _remember(_cache, raw, decoded)


def decode_headers(table: bytes) -> list[tuple[str, str | None]] | None:
    """Header items of one encoded headers table (its 4-octet length included), as ``decode``
    gives them; cached the same way. ValueError if the table is damaged."""
    hit = _table_cache.get(table, _table_cache)
    if hit is not _table_cache:
        return hit
    try:
        decoded, end = decode_table(table, 0)
        if end != len(table):
            raise ValueError("table length does not match")
        items = _headers(decoded)
    except (IndexError, struct.error, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"damaged headers table ({e})") from None
    return _remember(_table_cache, table, items)


def _remember(cache: dict, key: bytes, value):
    """Keep value under key in a cache emptied when it reaches CACHE_LIMIT entries."""
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[bytes(key)] = value
    return value


def strip_offset_header(raw: bytes) -> tuple[int | None, bytes]:
    """(x-stream-offset, the property list without that header) of a stream delivery's list.

    The broker appends the header at the end of the table (``stream_header.py``), so the
    common case is a check of the table's last 25 octets; a list where it sits elsewhere (a
    message re-published with the header) falls back to a walk of the table.
    """
    span = headers_span(raw)
    if span is None:
        return None, raw
    start, end = span
    tail = end - _OFFSET_ENTRY_SIZE
    if tail >= start + 4 and raw[tail:end - 8] == _OFFSET_ENTRY_HEAD:
        (offset,) = _I64.unpack_from(raw, end - 8)
        size = end - start - 4 - _OFFSET_ENTRY_SIZE
        if size == 0:  # the table only held the broker's header: the message had none
            return offset, _without_empty_table(raw, start, end)
        return offset, b"".join((raw[:start], _U32.pack(size), raw[start + 4:tail], raw[end:]))
    p, _ = BasicProperties.decode(raw, 0)
    value = (p.headers or {}).get(OFFSET_HEADER)
    return (value if isinstance(value, int) else None), remove_header(raw, OFFSET_HEADER)


def _without_empty_table(raw: bytes, start: int, end: int) -> bytes:
    """``raw`` without its headers table (at [start, end)) and with the headers flag cleared:
    the broker adds a table to a message that had none, so that is what the publisher sent (a
    publisher's own empty table reads the same way over AMQP: the two cannot be told apart)."""
    flags = ((raw[0] << 8) | raw[1]) & ~HEADERS_FLAG
    return b"".join((flags.to_bytes(2, "big"), raw[2:start], raw[end:]))
