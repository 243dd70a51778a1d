"""Validation of a basic content header's property list, as RabbitMQ decodes it.

Warren keeps a message's property list exactly as the publisher encoded it and hands those
octets to every consumer (``warren/broker/message.py``). A list no client can decode (a headers
table with an unknown type letter, a length that runs past the frame) would therefore be stored
and break every consumer that receives it, on every redelivery (issue 16). RabbitMQ decodes the
whole list when the content is complete and refuses such a publish with connection.close 541
INTERNAL_ERROR (its own crash); Warren checks the list at the edge, before anything is stored, and
refuses it as the client's fault: 501 FRAME_ERROR for a property that runs past the end of the
list, 502 SYNTAX_ERROR for anything else (``warren/codec/refusals.py``,
``warren/protocol/amqp0_9_1/connection.py``).

``properties_error(buf, start, end)`` scans ``buf[start:end]`` without building anything and
returns None when the list is well formed, else a short reason (``properties_failure``: the
reason and its kind of failure). The rules, each checked against
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

import struct

from warren.spec.fields import MAX_TABLE_DEPTH, TIMESTAMP_MAX
from warren.codec.refusals import MALFORMED, TRUNCATED
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["decode_basic_properties", "properties_error", "properties_failure", "well_formed", "salvage_properties", "BASIC_PROPERTIES",
           "CONTENT_TYPE_FLAG", "CONTENT_ENCODING_FLAG", "HEADERS_FLAG", "DELIVERY_MODE_FLAG", "PRIORITY_FLAG",
           "CORRELATION_ID_FLAG", "REPLY_TO_FLAG", "EXPIRATION_FLAG", "MESSAGE_ID_FLAG", "TIMESTAMP_FLAG",
           "TYPE_FLAG", "USER_ID_FLAG", "APP_ID_FLAG", "CLUSTER_ID_FLAG",
           "STREAM_OFFSET_HEADER", "DEDUPLICATION_HEADER"]

try:  # the compiled twin (setup.py), for callers that only need the verdict
    from warren.codec._speedups import properties_error as _compiled_error
except ImportError:
    _compiled_error = None

# The basic property flags (INVENTORY.md §8.1), bit 15 of the first flag word being the first
# property. Defined here only: every module that tests a flag imports it from here. The hot
# paths test one octet of the word: ``FLAG >> 8`` in the high octet, ``FLAG & 0xFF`` in the low.
CONTENT_TYPE_FLAG = 0x8000
CONTENT_ENCODING_FLAG = 0x4000
HEADERS_FLAG = 0x2000
DELIVERY_MODE_FLAG = 0x1000
PRIORITY_FLAG = 0x0800
CORRELATION_ID_FLAG = 0x0400
REPLY_TO_FLAG = 0x0200
EXPIRATION_FLAG = 0x0100
MESSAGE_ID_FLAG = 0x0080
TIMESTAMP_FLAG = 0x0040
TYPE_FLAG = 0x0020
USER_ID_FLAG = 0x0010
APP_ID_FLAG = 0x0008
CLUSTER_ID_FLAG = 0x0004

# the basic properties in wire order: (flag bit, kind) with kind "s" shortstr, "t" table,
# 1 an octet, 8 a timestamp
_LAYOUT = (
    (CONTENT_TYPE_FLAG, "s"), (CONTENT_ENCODING_FLAG, "s"), (HEADERS_FLAG, "t"), (DELIVERY_MODE_FLAG, 1),
    (PRIORITY_FLAG, 1), (CORRELATION_ID_FLAG, "s"), (REPLY_TO_FLAG, "s"), (EXPIRATION_FLAG, "s"),
    (MESSAGE_ID_FLAG, "s"), (TIMESTAMP_FLAG, 8), (TYPE_FLAG, "s"), (USER_ID_FLAG, "s"), (APP_ID_FLAG, "s"),
    (CLUSTER_ID_FLAG, "s"),
)
_NAMES = {
    CONTENT_TYPE_FLAG: "content-type", CONTENT_ENCODING_FLAG: "content-encoding", HEADERS_FLAG: "headers",
    DELIVERY_MODE_FLAG: "delivery-mode", PRIORITY_FLAG: "priority", CORRELATION_ID_FLAG: "correlation-id",
    REPLY_TO_FLAG: "reply-to", EXPIRATION_FLAG: "expiration", MESSAGE_ID_FLAG: "message-id",
    TIMESTAMP_FLAG: "timestamp", TYPE_FLAG: "type", USER_ID_FLAG: "user-id", APP_ID_FLAG: "app-id",
    CLUSTER_ID_FLAG: "cluster-id",
}
# the same layout, public, for readers that find fields without decoding (warren/spark):
# (flag bit, BasicProperties attribute name, kind) in wire order
BASIC_PROPERTIES = tuple((flag, _NAMES[flag].replace("-", "_"), kind) for flag, kind in _LAYOUT)
# headers the broker gives a meaning to: the offset it adds to stream deliveries, and the
# default key of message deduplication (warren/broker/dedup.py)
STREAM_OFFSET_HEADER = "x-stream-offset"
DEDUPLICATION_HEADER = "x-deduplication-header"
# field value types a headers table may hold: fixed sizes, then the length-prefixed ones
_FIXED_SIZE = {ord(t): n for t, n in (("t", 1), ("b", 1), ("B", 1), ("s", 2), ("u", 2), ("I", 4), ("i", 4),
                                      ("l", 8), ("L", 8), ("f", 4), ("d", 8), ("D", 5))}
_T, _V, _S, _x, _F, _A = b"TVSxFA"
_LENGTH_PREFIXED = frozenset((_S, _x, _F, _A))
_u32 = struct.Struct(">I").unpack_from
_u64 = struct.Struct(">Q").unpack_from
# flag word -> the (flag, kind) of the properties it says are present: a publisher sends few
# distinct words, so the 14-step walk is done once per word (at most 2**14 entries)
_present: dict[int, tuple] = {}


def _table_error(buf, off: int, end: int, depth: int, array: bool) -> str | None:
    """Why the entries buf[off:end] of a table (or array) are malformed, or None."""
    if depth > MAX_TABLE_DEPTH:
        return f"field tables nested more than {MAX_TABLE_DEPTH} deep"
    fixed = _FIXED_SIZE
    while off < end:
        if not array:
            off += 1 + buf[off]  # the name
            if off >= end:
                return "a table entry runs past the end of its table"
        tag = buf[off]
        off += 1
        size = fixed.get(tag)
        if size is not None:
            off += size
            if off > end:
                return f"a {chr(tag)!r} value runs past the end of its table"
        elif tag in _LENGTH_PREFIXED:
            if off + 4 > end:
                return f"a {chr(tag)!r} length runs past the end of its table"
            inner = off + 4 + _u32(buf, off)[0]
            if inner > end:
                return f"a {chr(tag)!r} value runs past the end of its table"
            if tag == _F or tag == _A:
                why = _table_error(buf, off + 4, inner, depth + 1, tag == _A)
                if why is not None:
                    return why
            off = inner
        elif tag == _T:
            if off + 8 > end:
                return "a 'T' value runs past the end of its table"
            if _u64(buf, off)[0] > TIMESTAMP_MAX:
                return "a timestamp past the year 9999"
            off += 8
        elif tag != _V:
            return f"unknown field type {chr(tag)!r} in the headers table"
    return None


def properties_error(buf, start: int = 0, end: int | None = None) -> str | None:
    """None if buf[start:end] is a well-formed basic property list, else why not (module doc)."""
    failure = properties_failure(buf, start, end)
    return None if failure is None else failure[1]


def properties_failure(buf, start: int = 0, end: int | None = None) -> tuple[str, str] | None:
    """None if buf[start:end] is a well-formed basic property list, else (kind, why): kind
    ``TRUNCATED`` when a property (or the flags) runs past the end of the list, ``MALFORMED``
    for anything else (inside a headers table whose length fits, say), the kinds that
    ``warren/codec/refusals.py`` turns into a reply code."""
    if end is None:
        end = len(buf)
    if end - start < 2:
        return TRUNCATED, "the property flags are cut short"
    flags = buf[start] << 8 | buf[start + 1]
    if flags & 1:
        return MALFORMED, "a second property flag word (no basic property needs one)"
    present = _present.get(flags)
    if present is None:
        present = _present[flags] = tuple((flag, kind) for flag, kind in _LAYOUT if flags & flag)
    off = start + 2
    for flag, kind in present:
        if kind == "s":
            if off >= end or off + 1 + buf[off] > end:
                return TRUNCATED, f"{_NAMES[flag]} runs past the end of the property list"
            off += 1 + buf[off]
        elif kind == "t":
            if off + 4 > end:
                return TRUNCATED, "the headers table length runs past the end of the property list"
            table_end = off + 4 + _u32(buf, off)[0]
            if table_end > end:
                return TRUNCATED, "the headers table runs past the end of the property list"
            why = _table_error(buf, off + 4, table_end, 1, False)
            if why is not None:
                return MALFORMED, why
            off = table_end
        else:
            off += kind
            if off > end:
                return TRUNCATED, f"{_NAMES[flag]} runs past the end of the property list"
    if off != end:
        return MALFORMED, f"{end - off} octets after the last property"
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


def decode_basic_properties(properties: bytes) -> BasicProperties:
    """The encoded property list (the broker's message container keeps it so, warren/broker/message.py)
    as a fresh 0-9-1 ``BasicProperties``; no octets give an empty one. Raises what the decoder raises
    on a malformed list (IndexError, ValueError, struct.error, RecursionError, OverflowError)."""
    if not properties:
        return BasicProperties()
    return BasicProperties.decode(properties, 0)[0]
