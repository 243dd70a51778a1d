"""Edits of an encoded basic property list, in place of decode + re-encode.

A message keeps its property list exactly as the publisher encoded it (``message.py``). A few
features must change it: sender-selected distribution drops the ``BCC`` header, the delayed
exchange negates ``x-delay``, direct reply-to rewrites ``reply-to``. Decoding and re-encoding
would change the type tags of values nobody touched (a field table keeps ``b``/``s``/``B``...
that Python ints cannot remember), so these helpers cut and splice octets instead: everything
outside the edited field is copied unchanged, as RabbitMQ does. The Spark reader uses them too
(cutting the broker's ``x-stream-offset`` from a stream delivery), so they live in the sans-IO
codec layer, beside the property flags (``properties.py``).

Layout (INVENTORY.md §8.1): a 16-bit flag word (bit 15 = first property), then the present
properties in order. Further flag words (continuation bit set) are skipped, as the decoder
does: no basic property needs one.
"""

from __future__ import annotations

import struct

from warren.spec.fields import RawValue, decode_shortstr, decode_value, encode_shortstr
from warren.codec.properties import (
    CONTENT_ENCODING_FLAG, CONTENT_TYPE_FLAG, CORRELATION_ID_FLAG, DELIVERY_MODE_FLAG, HEADERS_FLAG, PRIORITY_FLAG,
    REPLY_TO_FLAG,
)

__all__ = ["headers_span", "header_entries", "remove_header", "replace_header", "set_header", "replace_reply_to"]

_U32 = struct.Struct(">I")

# (flag, kind) of every basic property before reply-to, in wire order
_BEFORE_REPLY_TO = (
    (CONTENT_TYPE_FLAG, "s"), (CONTENT_ENCODING_FLAG, "s"), (HEADERS_FLAG, "t"), (DELIVERY_MODE_FLAG, 1),
    (PRIORITY_FLAG, 1), (CORRELATION_ID_FLAG, "s"),
)


def _skip(props, off: int, kind) -> int:
    if kind == "s":
        return off + 1 + props[off]
    if kind == "t":
        return off + 4 + _U32.unpack_from(props, off)[0]
    return off + kind


def _flags(props) -> tuple[int, int]:
    """(first flag word, offset of the first property)."""
    if len(props) < 2:
        return 0, 2
    off = 2
    while props[off - 1] & 1:
        off += 2
    return (props[0] << 8) | props[1], off


def headers_span(props) -> tuple[int, int] | None:
    """(start, end) of the encoded headers table (its 4-octet length included), or None."""
    flags, off = _flags(props)
    if not flags & HEADERS_FLAG:
        return None
    for flag, kind in _BEFORE_REPLY_TO[:2]:
        if flags & flag:
            off = _skip(props, off, kind)
    return off, _skip(props, off, "t")


def _entry(props, name: str) -> tuple[int, int, int, int] | None:
    """(table start, table end, entry start, entry end) of header ``name``, or None."""
    span = headers_span(props)
    if span is None:
        return None
    start, end = span
    off = start + 4
    while off < end:
        entry = off
        key, off = decode_shortstr(props, off)
        _, off = decode_value(props, off)
        if key == name:
            return start, end, entry, off
    return None


def header_entries(props) -> dict:
    """The headers as ``{name: RawValue}`` in wire order (the first of a repeated name), each
    value's octets as they came, so that entries nobody changes are written back exactly."""
    span = headers_span(props)
    raw: dict = {}
    if span is None:
        return raw
    off, end = span[0] + 4, span[1]
    while off < end:
        name, off = decode_shortstr(props, off)
        start = off
        _, off = decode_value(props, off)
        raw.setdefault(name, RawValue(bytes(props[start:off])))
    return raw


def set_header(props: bytes, name: str, encoded_value: bytes) -> bytes:
    """The property list (maybe empty) with header ``name`` set to ``encoded_value``, for a
    header set on every message of a kind (a stream delivery's ``x-stream-offset``): no headers
    table, one is inserted holding only the entry, after content-type and content-encoding (the
    only properties before it); a table without the name gets the entry appended and its size
    grown; only a table that may already have it (its octets appear) is walked, to replace it."""
    entry = encode_shortstr(name) + encoded_value
    if len(props) < 2:
        return b"\x20\x00" + _U32.pack(len(entry)) + entry
    flags, off = _flags(props)
    for flag, kind in _BEFORE_REPLY_TO[:2]:
        if flags & flag:
            off = _skip(props, off, kind)
    if not flags & HEADERS_FLAG:
        return b"".join((bytes((props[0] | HEADERS_FLAG >> 8,)), props[1:off], _U32.pack(len(entry)), entry,
                         props[off:]))
    (size,) = _U32.unpack_from(props, off)
    end = off + 4 + size
    if props.find(entry[:1 + len(name)], off + 4, end) >= 0:  # maybe present (or inside some value)
        try:
            return replace_header(props, name, encoded_value)
        except KeyError:
            pass  # those octets were part of another value: the name is absent after all
    return b"".join((props[:off], _U32.pack(size + len(entry)), props[off + 4:end], entry, props[end:]))


def remove_header(props: bytes, name: str) -> bytes:
    """The property list without header ``name`` (unchanged if it is absent)."""
    found = _entry(props, name)
    if found is None:
        return props
    start, end, e0, e1 = found
    size = end - start - 4 - (e1 - e0)
    return b"".join((props[:start], _U32.pack(size), props[start + 4:e0], props[e1:]))


def replace_header(props: bytes, name: str, encoded_value: bytes) -> bytes:
    """The property list with header ``name`` set to ``encoded_value`` (a tagged field value).

    The header must be present (callers replace a value they found).
    """
    found = _entry(props, name)
    if found is None:
        raise KeyError(name)
    start, end, e0, e1 = found
    entry = encode_shortstr(name) + encoded_value
    size = end - start - 4 - (e1 - e0) + len(entry)
    return b"".join((props[:start], _U32.pack(size), props[start + 4:e0], entry, props[e1:]))


def replace_reply_to(props: bytes, reply_to: str) -> bytes:
    """The property list with ``reply-to`` set to ``reply_to`` (it must be present)."""
    flags, off = _flags(props)
    if not flags & REPLY_TO_FLAG:
        raise KeyError("reply-to")
    for flag, kind in _BEFORE_REPLY_TO:
        if flags & flag:
            off = _skip(props, off, kind)
    end = _skip(props, off, "s")
    return b"".join((props[:off], encode_shortstr(reply_to), props[end:]))
