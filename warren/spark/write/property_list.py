"""The ``property_list`` column on the way out: an archived property list published as it was.

A row read from Warren can carry its basic property list exactly as the publisher encoded it
(the ``property_list`` column, schema.py). Publishing those octets unchanged is what makes an
archive and its replay a round trip: decoding and re-encoding would lose what Python values
cannot remember (a header's field type ``b``, ``s``, ``u``, ``i``, ``L``, ``f``; the order and
form of every property).

The row's readable columns (``headers``, ``properties``, ``message_id``, ``content_type``) are
renderings of the same list, so a row read from Warren and written back unchanged has them
agree with it, and the list is published as it is. Where a job changed one of them, the change
wins, field by field: a changed property is re-encoded, a changed header is replaced (as a
string, the column's type) and a header removed from the map is removed, while every property
and header left alone keeps its octets. Comparing is done on the renderings the reader gives
(``read/properties.py``), so it is exact for every value a row can show.

Everything here edits octets: ``split`` cuts a list into one encoded value per property,
``join`` puts it back; ``table_entries`` does the same for the entries of a headers table.
"""

from __future__ import annotations

import struct

from warren.spec.fields import decode_shortstr, decode_value, encode_shortstr, encode_value
from warren.codec.properties import BASIC_PROPERTIES, USER_ID_FLAG
from warren.spark.read import properties as rendering
from warren.spark.schema import PROPERTY_FIELDS

__all__ = ["split", "join", "table_entries", "join_table", "set_header", "without_user_id", "user_id_of",
           "merge_row", "NO_PROPERTIES"]

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
NO_PROPERTIES = b"\x00\x00"  # a flag word with no property present
_FLAG_OF = {name: flag for flag, name, _kind in BASIC_PROPERTIES}
_PROPERTY_NAMES = tuple(name for name, _ in PROPERTY_FIELDS)


def _end_of(raw, off: int, kind) -> int:
    if kind == "s":
        return off + 1 + raw[off]
    if kind == "t":
        return off + 4 + _U32.unpack_from(raw, off)[0]
    return off + kind


def split(raw: bytes) -> dict[str, bytes]:
    """name -> the property's encoded value (shortstr with its length octet, table with its
    length, the octet, the 8-octet timestamp), for every property present; ValueError if the
    list is cut short."""
    if len(raw) < 2:
        return {}
    flags = (raw[0] << 8) | raw[1]
    off = 2
    while raw[off - 1] & 1:  # continuation words: no basic property needs one (skipped, as decoders do)
        off += 2
    out = {}
    for flag, name, kind in BASIC_PROPERTIES:
        if flags & flag:
            end = _end_of(raw, off, kind)
            if end > len(raw):
                raise ValueError(f"property list cut short in {name}")
            out[name] = bytes(raw[off:end])
            off = end
    return out


def join(fields: dict[str, bytes]) -> bytes:
    """The property list of ``split``'s form (properties in wire order whatever the dict's)."""
    flags = 0
    parts = []
    for flag, name, _kind in BASIC_PROPERTIES:
        value = fields.get(name)
        if value is not None:
            flags |= flag
            parts.append(value)
    return flags.to_bytes(2, "big") + b"".join(parts)


def table_entries(table: bytes) -> list[tuple[str, bytes]]:
    """(name, encoded entry: name and tagged value) of every entry of an encoded table (its
    4-octet length included), in order."""
    end = 4 + _U32.unpack_from(table, 0)[0]
    off = 4
    out = []
    while off < end:
        start = off
        name, off = decode_shortstr(table, off)
        _, off = decode_value(table, off, end)
        out.append((name, bytes(table[start:off])))
    return out


def join_table(entries) -> bytes:
    body = b"".join(entry for _name, entry in entries)
    return _U32.pack(len(body)) + body


def set_header(raw: bytes, name: str, value) -> bytes:
    """The list with header ``name`` set to ``value`` (encoded by Warren's field encoder), every
    other header and property unchanged; a list without headers gets a table."""
    fields = split(raw)
    entry = encode_shortstr(name) + encode_value(value)
    entries = [e for e in table_entries(fields["headers"]) if e[0] != name] if "headers" in fields else []
    entries.append((name, entry))
    fields["headers"] = join_table(entries)
    return join(fields)


def user_id_of(raw: bytes) -> str | None:
    fields = split(raw)
    value = fields.get("user_id")
    return None if value is None else str(value[1:], "utf-8", "surrogateescape")


def without_user_id(raw: bytes) -> bytes:
    """The list without its user-id property (the rest as it was)."""
    if len(raw) < 2 or not ((raw[0] << 8) | raw[1]) & USER_ID_FLAG:
        return raw
    fields = split(raw)
    fields.pop("user_id", None)
    return join(fields)


def _encode_property(name: str, value) -> bytes | None:
    if value is None:
        return None
    kind = next(k for _f, n, k in BASIC_PROPERTIES if n == name)
    if kind == "s":
        return encode_shortstr(str(value))
    if kind == 1:
        return bytes((int(value) & 0xFF,))
    return _U64.pack(int(value))


def merge_row(raw: bytes, headers, has_headers: bool, props: dict) -> bytes:
    """``raw`` with the row's readable columns applied where they differ from it.

    ``headers``: the row's headers map as (name, text) pairs or None (``has_headers``: the
    DataFrame has that column at all); ``props``: property name -> the row's value (timestamps
    in whole seconds) for each readable property column the DataFrame has. Returns ``raw``
    itself when nothing differs (the common case: a row read from Warren, written back).
    """
    shown_headers, shown = rendering.decode(raw)
    changed: dict[str, object] = {}
    for name, value in props.items():
        was = shown[_PROPERTY_NAMES.index(name)]
        if name == "timestamp":
            now = None if value is None else int(value) * 1_000_000
        else:
            now = value
        if now != was:
            changed[name] = value
    headers_changed = has_headers and dict(headers or ()) != dict(shown_headers or ())
    if not changed and not headers_changed:
        return raw
    fields = split(raw)
    for name, value in changed.items():
        encoded = _encode_property(name, value)
        if encoded is None:
            fields.pop(name, None)
        else:
            fields[name] = encoded
    if headers_changed:
        wanted = dict(headers or ())
        was = dict(shown_headers or ())
        kept = []
        for name, entry in (table_entries(fields["headers"]) if "headers" in fields else []):
            if name == rendering.OFFSET_HEADER or name not in wanted:
                continue  # removed from the map (the broker's offset header is never shown)
            if wanted[name] == was.get(name):
                kept.append((name, entry))  # unchanged: its field type kept
            else:
                kept.append((name, encode_shortstr(name) + encode_value(wanted[name])))
        present = {name for name, _ in kept}
        kept += [(name, encode_shortstr(name) + encode_value(value)) for name, value in wanted.items()
                 if name not in present and name not in was]
        if kept:
            fields["headers"] = join_table(kept)
        else:
            fields.pop("headers", None)
    return join(fields)
