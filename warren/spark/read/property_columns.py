"""The property columns of a batch (``headers``, ``properties``, and the flat ``message_id`` and
``content_type``), from the encoded property lists; only the columns asked for are built.

Three ways, chosen per batch, with the same result (tests/spark/read/test_records.py checks it):

* **one list** (a stream whose messages all carry the same properties): when every list has the
  same length and the same octets (one vectorised comparison), it is decoded once and each
  column asked for is that value repeated;

* **by distinct list** (most streams): Arrow dictionary-encodes the property lists; each
  distinct one is decoded once by Warren's own decoder (``properties.decode``, cached) and
  Arrow ``take`` spreads the decoded columns over the rows. Costs a hash per row;
* **field by field** (when most lists differ, e.g. a message id per message, which a
  per-list decode would pay for in Python on every row): the property list is walked for all
  rows at once, one property at a time, with numpy: the flag word says which properties are
  present, each present one's length moves a per-row cursor, and values become Arrow views
  and integer arrays. Only the headers tables are left to Python, again by distinct table.

A batch with a continuation flag word (no basic property needs one) takes the first way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warren.codec.properties import BASIC_PROPERTIES
from warren.spark.read import properties
from warren.spark.read.gather import be_uint, gather, views
from warren.spark.schema import PROPERTY_FIELDS

__all__ = ["PROPERTIES_TYPE", "HEADERS_TYPE", "PROPERTY_COLUMNS", "property_columns", "text_column", "DISTINCT_SHARE"]

_ARROW_TYPES = {"string": pa.string(), "int": pa.int32(), "timestamp": pa.timestamp("us", tz="UTC")}
PROPERTIES_TYPE = pa.struct([pa.field(name, _ARROW_TYPES[kind]) for name, kind in PROPERTY_FIELDS])
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
_COLUMN_TYPES = {"headers": HEADERS_TYPE, "properties": PROPERTIES_TYPE, "message_id": pa.string(),
                 "content_type": pa.string()}
# decode by distinct list while there are at most this share of distinct lists (or very few)
DISTINCT_SHARE = 0.25
DISTINCT_FEW = 256

# the basic properties in wire order, from the codec: (flag, name, kind) with kind "s" shortstr,
# "t" table, 1 an octet, 8 a 64-bit timestamp. cluster-id is read past but not kept (deprecated,
# not in the schema)
_WIRE = BASIC_PROPERTIES


def text_column(column: pa.Array) -> pa.Array:
    """A binary(-view) column as strings; invalid UTF-8 becomes U+FFFD, as ``properties`` renders."""
    try:
        return column.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in column.to_pylist()],
                        type=pa.string())


FLAT_FIELDS = ("message_id", "content_type")  # basic properties that are also columns of their own
PROPERTY_COLUMNS = ("headers", "properties", *FLAT_FIELDS)
SAME_CHECK_MAX = 256  # lists up to this long are compared octet by octet for the one-list way


def _decoded_columns(raws: list, wanted) -> dict[str, pa.Array]:
    """The columns asked for, one row per encoded list of ``raws`` (decoded by ``properties``)."""
    decoded = [properties.decode(raw) for raw in raws]
    out = {}
    if "headers" in wanted:
        out["headers"] = pa.array([h for h, _ in decoded], type=HEADERS_TYPE)
    for i, field in enumerate(PROPERTIES_TYPE):
        if field.name in wanted:
            out[field.name] = pa.array([values[i] for _, values in decoded], type=field.type)
    if "properties" in wanted:
        children = [pa.array([values[i] for _, values in decoded], type=field.type)
                    for i, field in enumerate(PROPERTIES_TYPE)]
        out["properties"] = pa.StructArray.from_arrays(children, fields=list(PROPERTIES_TYPE))
    return out


def _by_distinct_list(encoded: pa.DictionaryArray, wanted) -> dict[str, pa.Array]:
    columns = _decoded_columns(encoded.dictionary.to_pylist(), wanted)
    return {name: column.take(encoded.indices) for name, column in columns.items()}


def _one_list(u8, starts, lengths) -> bytes | None:
    """The property list every row has, when they all have the same one (else None)."""
    n = len(starts)
    size = int(lengths[0])
    if size > SAME_CHECK_MAX or (lengths != size).any():
        return None
    if size == 0:
        return b""
    octets = gather(u8, starts, size)
    if n > 1 and not (octets[1:] == octets[0]).all():
        return None
    return octets[0].tobytes()


def _repeated(column: pa.Array, n: int) -> pa.Array:
    """A one-row array repeated ``n`` times."""
    return column.take(pa.array(np.zeros(n, dtype=np.int32)))


def _headers_column(u8, buffer, at, size, present) -> pa.Array:
    tables = views(u8, buffer, at, np.where(present, size, 0), present=present).cast(pa.binary())
    encoded = pc.dictionary_encode(tables)
    decoded = pa.array([properties.decode_headers(raw) for raw in encoded.dictionary.to_pylist()], type=HEADERS_TYPE)
    return decoded.take(encoded.indices)  # a null index (no table) gives a null map


def _field_by_field(u8, buffer, starts, lengths, n, wanted) -> dict[str, pa.Array] | None:
    size = len(u8) - 16
    ends = starts + lengths
    has_flags = lengths >= 2
    flags = np.where(has_flags, be_uint(u8, np.minimum(starts, size), 2), 0)
    if (flags & 1).any():
        return None
    cursor = starts + 2
    found: dict[str, tuple] = {}
    for bit, name, kind in _WIRE:
        present = (flags & bit) != 0
        if not present.any():
            continue
        at = np.minimum(cursor, size)  # only present rows' values are used; others stay in bounds
        if kind == "s":
            length = np.where(present, u8[at], 0).astype(np.int64)
            found[name] = (at + 1, length, present)
            cursor = cursor + np.where(present, 1 + length, 0)
        elif kind == "t":
            length = np.where(present, 4 + be_uint(u8, at, 4), 0)
            found[name] = (at, length, present)
            cursor = cursor + length
        elif kind == 1:
            found[name] = (u8[at].astype(np.int32), present)
            cursor = cursor + present
        else:
            found[name] = (gather(u8, at, 8).view(">u8").reshape(n).astype(np.uint64), present)
            cursor = cursor + 8 * present
    damaged = has_flags & (cursor > ends)
    if damaged.any():
        raise ValueError(f"damaged property list in row {int(damaged.argmax())}")
    def child(field) -> pa.Array:
        got = found.get(field.name)
        if got is None:
            return pa.nulls(n, type=field.type)
        if field.type == pa.string():
            at, length, present = got
            return text_column(views(u8, buffer, at, length, present=present))
        if field.type == pa.int32():
            values, present = got
            return pa.array(values, mask=~present, type=pa.int32())
        # the timestamp, seconds -> microseconds; after year 9999: null, as properties.py
        secs, present = got
        ok = present & (secs <= properties.MAX_TIMESTAMP_S)
        micros = np.where(ok, secs, 0).astype(np.int64) * 1_000_000
        return pa.array(micros, mask=~ok, type=field.type)

    out = {}
    children = {}
    for field in PROPERTIES_TYPE:
        if "properties" in wanted or field.name in wanted:
            children[field.name] = child(field)
            if field.name in wanted:
                out[field.name] = children[field.name]
    if "properties" in wanted:
        out["properties"] = pa.StructArray.from_arrays([children[f.name] for f in PROPERTIES_TYPE],
                                                       fields=list(PROPERTIES_TYPE))
    if "headers" in wanted:
        if "headers" in found:
            at, length, present = found["headers"]
            out["headers"] = _headers_column(u8, buffer, at, length, present)
        else:
            out["headers"] = pa.nulls(n, type=HEADERS_TYPE)
    return out


def property_columns(u8: np.ndarray, buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
                     wanted=PROPERTY_COLUMNS, way: str | None = None) -> dict[str, pa.Array]:
    """The columns named in ``wanted`` (of ``PROPERTY_COLUMNS``) of the property lists at
    [starts, starts + lengths) of ``buffer`` (``u8``: the same octets, padded). ``way`` forces
    "one", "distinct" or "fields" (tests)."""
    wanted = frozenset(wanted) & frozenset(PROPERTY_COLUMNS)
    n = len(starts)
    if not wanted or n == 0:
        return {name: pa.array([], type=_COLUMN_TYPES[name]) for name in wanted}
    if way in (None, "one"):
        raw = _one_list(u8, starts, lengths)
        if raw is not None:
            return {name: _repeated(column, n) for name, column in _decoded_columns([raw], wanted).items()}
    encoded = None
    if way in (None, "distinct") and (way == "distinct" or not wanted <= frozenset(FLAT_FIELDS)):
        # (flat fields alone: the vectorised walk costs less than hashing every list)
        encoded = pc.dictionary_encode(views(u8, buffer, starts, lengths).cast(pa.binary()))
        few = len(encoded.dictionary) <= max(DISTINCT_FEW, n * DISTINCT_SHARE)
        if few or way == "distinct":
            return _by_distinct_list(encoded, wanted)
    columns = _field_by_field(u8, buffer, starts, lengths, n, wanted)
    if columns is not None:
        return columns
    if encoded is None:
        encoded = pc.dictionary_encode(views(u8, buffer, starts, lengths).cast(pa.binary()))
    return _by_distinct_list(encoded, wanted)
