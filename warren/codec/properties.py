"""Validation of a basic content header's property list, as RabbitMQ decodes it.

Warren keeps a message's property list exactly as the publisher encoded it and hands those
octets to every consumer (``warren/broker/message.py``). A list no client can decode (a headers
table with an unknown type letter, a length that runs past the frame) would therefore be stored
and break every consumer that receives it, on every redelivery (issue 16). RabbitMQ decodes the
whole list when the content is complete and refuses such a publish with connection.close 541
INTERNAL_ERROR; Warren checks the list at the edge, before anything is stored, and refuses it the
same way (``warren/protocol/amqp0_9_1/connection.py``).

``properties_error(buf, start, end)`` scans ``buf[start:end]`` without building anything and
returns None when the list is well formed, else a short reason. The rules, each checked against
RabbitMQ 3.10 with raw frames:

* a flag word (2 octets) must be there; a continuation bit (bit 0) is refused: no basic
  property needs a second word and RabbitMQ refuses one. Bit 1 (no property) is ignored, as
  RabbitMQ ignores it.
* each present property must fit: shortstr (length octet + octets), table (4-octet length +
  entries), octet, timestamp (8 octets); nothing may follow the last one.
* the headers table (nested tables and arrays too) holds only the types RabbitMQ accepts there:
  ``t b B s u I i l L f d D S T x V F A`` (RabbitMQ refuses ``U``), every entry inside its
  table's length, nesting at most ``MAX_TABLE_DEPTH`` deep and timestamps no later than the
  year 9999 (what ``datetime``, and so pika, can hold; RabbitMQ accepts both, the two places
  where Warren is stricter, ``docs/compatibility.md``).

Strings are not checked for UTF-8: RabbitMQ accepts any octets there and every client tested
decodes them leniently. The compiled twin is ``properties_error`` in ``_speedups.c`` (the
publish fast path runs it on each new property list); ``tests/protocol/test_speedups.py``
checks that both give the same verdict on any octets.
"""

from __future__ import annotations

from warren.codec.fields import MAX_TABLE_DEPTH, TIMESTAMP_MAX

__all__ = ["properties_error", "well_formed", "salvage_properties", "BASIC_PROPERTIES", "HEADERS_FLAG",
           "STREAM_OFFSET_HEADER", "DEDUPLICATION_HEADER"]

try:  # the compiled twin (setup.py), for callers that only need the verdict
    from warren.codec._speedups import properties_error as _compiled_error
except ImportError:
    _compiled_error = None

# the basic properties in wire order: (flag bit, kind) with kind "s" shortstr, "t" table,
# 1 an octet, 8 a timestamp
_LAYOUT = (
    (0x8000, "s"), (0x4000, "s"), (0x2000, "t"), (0x1000, 1), (0x0800, 1), (0x0400, "s"), (0x0200, "s"),
    (0x0100, "s"), (0x0080, "s"), (0x0040, 8), (0x0020, "s"), (0x0010, "s"), (0x0008, "s"), (0x0004, "s"),
)
_NAMES = {
    0x8000: "content-type", 0x4000: "content-encoding", 0x2000: "headers", 0x1000: "delivery-mode",
    0x0800: "priority", 0x0400: "correlation-id", 0x0200: "reply-to", 0x0100: "expiration",
    0x0080: "message-id", 0x0040: "timestamp", 0x0020: "type", 0x0010: "user-id", 0x0008: "app-id",
    0x0004: "cluster-id",
}
# the same layout, public, for readers that find fields without decoding (warren/spark):
# (flag bit, BasicProperties attribute name, kind) in wire order
BASIC_PROPERTIES = tuple((flag, _NAMES[flag].replace("-", "_"), kind) for flag, kind in _LAYOUT)
HEADERS_FLAG = 0x2000
# headers the broker gives a meaning to: the offset it adds to stream deliveries, and the
# default key of message deduplication (warren/broker/dedup.py)
STREAM_OFFSET_HEADER = "x-stream-offset"
DEDUPLICATION_HEADER = "x-deduplication-header"
# field value types a headers table may hold: fixed sizes, then the length-prefixed ones
_FIXED_SIZE = {ord(t): n for t, n in (("t", 1), ("b", 1), ("B", 1), ("s", 2), ("u", 2), ("I", 4), ("i", 4),
                                      ("l", 8), ("L", 8), ("f", 4), ("d", 8), ("D", 5))}
_T, _V, _S, _x, _F, _A = b"TVSxFA"


def _table_error(buf, off: int, end: int, depth: int, array: bool) -> str | None:
    """Why the entries buf[off:end] of a table (or array) are malformed, or None."""
    if depth > MAX_TABLE_DEPTH:
        return f"field tables nested more than {MAX_TABLE_DEPTH} deep"
    while off < end:
        if not array:
            off += 1 + buf[off]  # the name
            if off >= end:
                return "a table entry runs past the end of its table"
        tag = buf[off]
        off += 1
        size = _FIXED_SIZE.get(tag)
        if size is not None:
            off += size
            if off > end:
                return f"a {chr(tag)!r} value runs past the end of its table"
        elif tag == _T:
            if off + 8 > end:
                return "a 'T' value runs past the end of its table"
            if int.from_bytes(buf[off:off + 8], "big") > TIMESTAMP_MAX:
                return "a timestamp past the year 9999"
            off += 8
        elif tag == _V:
            pass
        elif tag == _S or tag == _x or tag == _F or tag == _A:
            if off + 4 > end:
                return f"a {chr(tag)!r} length runs past the end of its table"
            inner = off + 4 + int.from_bytes(buf[off:off + 4], "big")
            if inner > end:
                return f"a {chr(tag)!r} value runs past the end of its table"
            if tag == _F or tag == _A:
                why = _table_error(buf, off + 4, inner, depth + 1, tag == _A)
                if why is not None:
                    return why
            off = inner
        else:
            return f"unknown field type {chr(tag)!r} in the headers table"
    return None


def properties_error(buf, start: int = 0, end: int | None = None) -> str | None:
    """None if buf[start:end] is a well-formed basic property list, else why not (module doc)."""
    if end is None:
        end = len(buf)
    if end - start < 2:
        return "the property flags are cut short"
    flags = buf[start] << 8 | buf[start + 1]
    if flags & 1:
        return "a second property flag word (no basic property needs one)"
    off = start + 2
    for flag, kind in _LAYOUT:
        if not flags & flag:
            continue
        if kind == "s":
            if off >= end or off + 1 + buf[off] > end:
                return f"{_NAMES[flag]} runs past the end of the property list"
            off += 1 + buf[off]
        elif kind == "t":
            if off + 4 > end:
                return "the headers table length runs past the end of the property list"
            table_end = off + 4 + int.from_bytes(buf[off:off + 4], "big")
            if table_end > end:
                return "the headers table runs past the end of the property list"
            why = _table_error(buf, off + 4, table_end, 1, False)
            if why is not None:
                return why
            off = table_end
        else:
            off += kind
            if off > end:
                return f"{_NAMES[flag]} runs past the end of the property list"
    if off != end:
        return f"{end - off} octets after the last property"
    return None


def well_formed(properties) -> bool:
    """Whether a whole property list passes ``properties_error`` (in C when it is built)."""
    if _compiled_error is not None:
        return _compiled_error(properties, 0, len(properties)) is None
    return properties_error(properties) is None


def salvage_properties(properties: bytes) -> tuple[bytes, str | None]:
    """A well-formed property list made from ``properties``, and what was dropped (None if nothing).

    For messages stored before the edge validated them (a data folder from an older Warren):
    every property up to the first malformed one is kept; a headers table that is malformed
    inside a length that fits is replaced by an empty one and the properties after it are kept
    too; anything after a property whose length cannot be trusted is dropped.
    """
    if well_formed(properties):
        return properties, None
    end = len(properties)
    if end < 2:
        return b"\x00\x00", "the property flags were cut short"
    flags = (properties[0] << 8 | properties[1]) & 0xFFFC
    kept_flags = 0
    parts: list[bytes] = []
    dropped: list[str] = []
    off = 2
    while properties[off - 1] & 1 and off + 2 <= end:  # continuation words: skipped, as decoders do
        off += 2
        dropped.append("a second property flag word")
    for flag, kind in _LAYOUT:
        if not flags & flag:
            continue
        name = _NAMES[flag]
        if kind == "s":
            ok = off < end and off + 1 + properties[off] <= end
            size = 1 + properties[off] if ok else 0
        elif kind == "t":
            ok = off + 4 <= end and off + 4 + int.from_bytes(properties[off:off + 4], "big") <= end
            size = 4 + int.from_bytes(properties[off:off + 4], "big") if ok else 0
            if ok and _table_error(properties, off + 4, off + size, 1, False) is not None:
                dropped.append(f"{name} (malformed, replaced by an empty table)")
                kept_flags |= flag
                parts.append(b"\x00\x00\x00\x00")
                off += size
                continue
        else:
            ok = off + kind <= end
            size = kind
        if not ok:
            dropped.append(f"{name} and everything after it (cut short)")
            break
        kept_flags |= flag
        parts.append(bytes(properties[off:off + size]))
        off += size
    else:
        if off < end:
            dropped.append(f"{end - off} octets after the last property")
    fixed = kept_flags.to_bytes(2, "big") + b"".join(parts)
    return fixed, "; ".join(dropped) or "nothing"
