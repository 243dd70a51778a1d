"""The records endpoint's filter on basic properties and headers, applied record by record.

A records request (``GET /api/streams/{vhost}/{name}/records``) may name conditions on the
messages' properties and headers, which the Spark source pushes down (``pushFilters``):

* ``property.<name>=<value>``: the basic property ``<name>`` (``content_type``, ``type``,
  ``app_id``, ... ``delivery_mode``, ``priority``; not ``headers`` nor ``timestamp``) has that value;
* ``header.<name>=<value>``: the header ``<name>`` has that value, rendered as text as the Spark
  source's ``headers`` column renders it (``warren/codec/render.py``: an integer header 5 is
  ``"5"``, a boolean ``"true"``).

A parameter given several times is any of its values (SQL's ``IN``); different names must all
hold. The answer then holds only the matching records (with ``routing_key`` or ``filter`` too:
only those of the blocks the Bloom filters let through, ``stream_filter.py``).

Warren's stream log has no index of property values (the per-block Bloom filters cover the
routing key and ``x-stream-filter-value`` only: decoding every published message's properties
would tax the publish path of every stream), so the filter is applied where the records are
read: the range is read from the segment as for any request, and the records that cannot
match are dropped before the answer leaves. What is saved is the transfer, the reader's parse
and Spark's work; the broker still reads the whole range from disk. Cheap first, exact last:

1. when a condition asks only for texts that no non-text header value renders to (not a
   number, a boolean, a timestamp, JSON), a matching record must hold one of those texts'
   octets; ``bytes.find`` over the whole read (C speed) finds the few records that do;
2. those records' property lists are decoded (cached by their octets: most streams repeat a
   few) and each condition checked exactly, with the reader's rendering.

A record whose property list cannot be decoded is sent: the reader decides (it raises).
The scan of one request is bounded (``SCAN_BYTES``): a selective filter over a long range
answers with fewer records, or none, and the offset to go on from.
"""

from __future__ import annotations

import bisect
import re
import struct

from warren.codec.properties import BASIC_PROPERTIES, decode_basic_properties
from warren.codec.render import render_value, valid_text
from warren.codec.bulk_records import ENTRY_HEADER_SIZE

__all__ = ["MatchedRecords", "RecordMatch", "record_match", "SCAN_BYTES"]

# the properties a request may name (headers and the timestamp are not text values)
PROPERTY_NAMES = frozenset(name for _flag, name, kind in BASIC_PROPERTIES
                           if name not in ("headers", "timestamp", "cluster_id"))
_INT_PROPERTIES = frozenset(name for _flag, name, kind in BASIC_PROPERTIES if kind == 1)
SCAN_BYTES = 32 * 1024 * 1024  # octets of records one request looks at, at most
_READ_BYTES = 4 * 1024 * 1024  # octets read from the store at a time
_CACHE_LIMIT = 4096
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
# what a non-text header renders to: numbers (integers, floats, decimals), timestamps, booleans
_NOT_TEXT = re.compile(r"[-+0-9.eE:TZ]*|[-+]?(inf|nan|Infinity|NaN|sNaN)|true|false")


def _plain(value: str) -> bool:
    """Whether only a text header (or property) can render to ``value``: then a record holding
    it holds its UTF-8 octets."""
    return ("\ufffd" not in value and not value.startswith(("{", "["))
            and _NOT_TEXT.fullmatch(value) is None)


class RecordMatch:
    """The conditions of one request: ``fields`` maps ("property", name) or ("header", name)
    to the texts allowed; ``needles``: octets one of which a matching record must hold (the
    condition whose texts are all plain, if any), empty when no condition allows the shortcut."""

    __slots__ = ("fields", "needles", "_cache")

    def __init__(self, fields: dict[tuple[str, str], frozenset]) -> None:
        self.fields = fields
        self.needles: tuple[bytes, ...] = ()
        for (kind, name), texts in fields.items():
            if kind == "property" and name in _INT_PROPERTIES:
                continue
            if kind == "header" and not all(_plain(t) for t in texts):
                continue
            if kind == "property" and any("\ufffd" in t for t in texts):
                continue
            if not all(texts):  # an empty text has no octets to look for
                continue
            self.needles = tuple(sorted(t.encode("utf-8") for t in texts))
            break
        self._cache: dict[bytes, bool] = {}

    def matches(self, props: bytes) -> bool:
        """Whether the encoded property list ``props`` meets every condition (True when it
        cannot be decoded: the reader reports it)."""
        hit = self._cache.get(props)
        if hit is not None:
            return hit
        try:
            verdict = self._check(props)
        except Exception:  # noqa: BLE001 - a damaged list: send it, the reader raises
            verdict = True
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[props] = verdict
        return verdict

    def _check(self, props: bytes) -> bool:
        if len(props) < 2:
            p = None
        else:
            p = decode_basic_properties(props)
        for (kind, name), texts in self.fields.items():
            if p is None:
                return False
            if kind == "property":
                value = getattr(p, name)
            else:
                table = p.headers or {}
                value = table.get(name) if name in table else next(
                    (v for k, v in table.items() if valid_text(k) == name), None)
            text = render_value(value)
            if text is None or text not in texts:
                return False
        return True


def _params(query, prefix: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    items = query.items() if hasattr(query, "items") else ()
    for key, value in items:  # aiohttp's MultiDict yields every repeated key
        if key.startswith(prefix):
            out.setdefault(key[len(prefix):], []).append(value)
    return out


def record_match(query) -> RecordMatch | None:
    """The conditions a records request names (None without any); ValueError naming a property
    that cannot be filtered on."""
    fields: dict[tuple[str, str], frozenset] = {}
    for name, values in _params(query, "property.").items():
        if name not in PROPERTY_NAMES:
            raise ValueError(f"property.{name}: no such basic property to filter on "
                             f"(one of {', '.join(sorted(PROPERTY_NAMES))})")
        fields[("property", name)] = frozenset(values)
    for name, values in _params(query, "header.").items():
        if not name:
            raise ValueError("header.: a header name is required")
        fields[("header", name)] = frozenset(values)
    return RecordMatch(fields) if fields else None


def _entries(data: bytes) -> list[int]:
    """The position of every entry in ``data`` (whole entries, as the store reads them)."""
    out = []
    add = out.append
    unpack = _U32.unpack_from
    pos, size = 0, len(data)
    while pos + ENTRY_HEADER_SIZE <= size:
        add(pos)
        pos += ENTRY_HEADER_SIZE + unpack(data, pos + 20)[0]
    return out


def _props(data: bytes, pos: int) -> bytes:
    """The property list of the record of the entry at ``pos``: exchange (shortstr), routing
    key (shortstr), properties (longstr), body."""
    at = pos + ENTRY_HEADER_SIZE
    at += 1 + data[at]
    at += 1 + data[at]
    (size,) = _U32.unpack_from(data, at)
    return data[at + 4:at + 4 + size]


def select(data: bytes, match: RecordMatch) -> list[tuple[int, int]]:
    """(start, end) of each entry of ``data`` that meets ``match``, in order."""
    positions = _entries(data)
    if not positions:
        return []
    if match.needles:  # only the entries holding a needle can match
        chosen = set()
        for needle in match.needles:
            at = data.find(needle)
            while at >= 0:
                i = bisect.bisect_right(positions, at) - 1
                chosen.add(i)
                # go on after this entry: one hit per entry is enough
                nxt = positions[i + 1] if i + 1 < len(positions) else len(data)
                at = data.find(needle, max(nxt, at + 1))
        candidates = sorted(chosen)
    else:
        candidates = range(len(positions))
    out = []
    size = len(data)
    for i in candidates:
        pos = positions[i]
        end = positions[i + 1] if i + 1 < len(positions) else size
        try:
            props = _props(data, pos)
        except (IndexError, struct.error):
            out.append((pos, end))  # damaged: the reader reports it
            continue
        if match.matches(props):
            out.append((pos, end))
    return out


class MatchedRecords:
    """A store (or a ``FilteredRecords`` view) as the records endpoint reads it for a request
    with property or header conditions: ``read_raw`` gives only the matching entries. Their
    offsets are not consecutive, so, as ``FilteredRecords``, it reports ``first = next - count``,
    ``next`` being the offset after the last record looked at."""

    __slots__ = ("_view", "_match")

    def __init__(self, view, match: RecordMatch) -> None:
        self._view = view
        self._match = match

    def __getattr__(self, name):
        return getattr(self._view, name)

    def read_raw(self, offset: int, max_records: int, max_bytes: int, end: int | None = None):
        view = self._view
        last = view.committed_offset if end is None else min(end - 1, view.committed_offset)
        stop = last + 1
        cursor = offset
        parts: list[bytes] = []
        sent, sent_bytes, scanned = 0, 0, 0
        while cursor < stop and sent < max_records and scanned < SCAN_BYTES:
            first, count, data = view.read_raw(cursor, 1_000_000, _READ_BYTES, stop)
            if not count:  # retention passed it, or nothing left
                cursor = max(cursor, first)
                break
            scanned += len(data)
            full = False
            for start, finish in select(data, self._match):
                if sent >= max_records or (sent and sent_bytes + finish - start > max_bytes):
                    (cursor,) = _U64.unpack_from(data, start + 4)  # go on from this record next time
                    full = True
                    break
                parts.append(data[start:finish])
                sent += 1
                sent_bytes += finish - start
            if full:
                break
            cursor = first + count
        return cursor - sent, sent, b"".join(parts)
