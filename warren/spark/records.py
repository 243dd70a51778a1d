"""BULK FORMAT octets (and AMQP deliveries) to Arrow record batches of the ``warren`` schema.

Spark moves rows from Python to the JVM as Arrow batches; handing it whole batches instead of
tuples is what makes a Python data source fast (6.8M rows/s per core against 1.06M). So the
parser never builds a Python object per message:

1. entry positions: entries are length-prefixed, so finding them is the one sequential step.
   Streams whose records all have the same size (common) are checked in one vectorised pass
   (every length field equal, the sizes adding up); otherwise a tight loop reads one length
   per entry;
2. everything else is gathered with numpy at those positions: the offset from each entry
   header, then inside each record (``warren/store/message.py``) the exchange and routing
   key lengths, the property list length, and from them where body, names and property list
   start and end;
3. string and binary columns are Arrow *binary views* over the response buffer (16 octets per
   row: length, and the value inline when it is short, else a prefix and its position), cast
   by Arrow in C++ into the plain ``binary``/``string`` arrays the schema has;
4. property lists: Arrow dictionary-encodes them, Python decodes each distinct one
   (``properties.decode``, cached), and Arrow ``take`` spreads the decoded columns back over
   the rows.

CRCs are checked only when asked (``verify=True``): the broker checked them when it wrote and
recovered its segments, TCP checks the transfer, and checking costs a Python call per entry.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warren.spark import properties
from warren.spark.schema import PROPERTY_FIELDS
from warren.store.stream_format import ENTRY_HEADER_SIZE

__all__ = [
    "ARROW_SCHEMA", "PROPERTIES_TYPE", "HEADERS_TYPE", "entry_positions", "parse_bulk", "build_batch",
    "empty_batch",
]

_ARROW_TYPES = {"string": pa.string(), "int": pa.int32(), "timestamp": pa.timestamp("us", tz="UTC")}
PROPERTIES_TYPE = pa.struct([pa.field(name, _ARROW_TYPES[kind]) for name, kind in PROPERTY_FIELDS])
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
# exactly what pyspark derives from SCHEMA_DDL (to_arrow_schema, timezone UTC): it refuses a
# batch whose schema differs in anything, nullability included (tests/spark/test_records.py)
ARROW_SCHEMA = pa.schema([
    ("body", pa.binary()), ("routing_key", pa.string()), ("exchange", pa.string()),
    ("headers", HEADERS_TYPE), ("properties", PROPERTIES_TYPE), ("offset", pa.int64()),
    ("stream", pa.string()),
])

_U32 = struct.Struct(">I")
_INLINE = 12  # a binary view holds values up to 12 octets inline
_PAD = 16  # zero octets after the data: any fixed-width read (at most 12) stays in bounds
# row L: L octets kept, the rest of the 12 cleared, as three native uint32 words
_MASKS = np.array([[0xFF] * k + [0] * (_INLINE - k) for k in range(_INLINE + 1)], dtype=np.uint8).view(np.uint32)


def entry_positions(data) -> np.ndarray:
    """The position of every entry's header in ``data`` (int64); ValueError if one is cut short."""
    size = len(data)
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    if size < ENTRY_HEADER_SIZE:
        raise ValueError(f"entry header cut short at 0 ({size} octets)")
    (first_len,) = _U32.unpack_from(data, 20)
    step = ENTRY_HEADER_SIZE + first_len
    if size % step == 0:
        positions = np.arange(0, size, step, dtype=np.int64)
        lengths = np.ndarray(shape=(len(positions),), dtype=">u4", buffer=data, offset=20, strides=(step,))
        if (lengths == first_len).all():
            return positions
    return _positions_loop(data, size)


def _positions_loop(data, size: int) -> np.ndarray:
    out = []
    add = out.append
    unpack = _U32.unpack_from
    pos = 0
    last = size - ENTRY_HEADER_SIZE
    while pos <= last:
        add(pos)
        pos += ENTRY_HEADER_SIZE + unpack(data, pos + 20)[0]
    if pos != size:
        at = out[-1] if pos > size else pos
        raise ValueError(f"entry at {at} cut short ({size} octets of bulk data)")
    return np.array(out, dtype=np.int64)


def _padded(data) -> np.ndarray:
    """``data`` as uint8 with ``_PAD`` zero octets after it, so that a fixed-width read at any
    position inside it stays in bounds (one memcpy of the response)."""
    u8 = np.zeros(len(data) + _PAD, dtype=np.uint8)
    u8[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    return u8


def _gather(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` octets at each position ``at`` of the padded ``u8``, as an (n, width) array.

    The buffer is seen as overlapping ``width``-octet records one octet apart, so the gather
    copies whole records (one memcpy each in numpy's loop) rather than single octets.
    """
    windows = np.ndarray(shape=(len(u8) - width + 1,), dtype=np.dtype((np.void, width)), buffer=u8, strides=(1,))
    return windows[at].view(np.uint8).reshape(len(at), width)


def _be(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of ``width`` (1, 4 or 8) octets at positions ``at``, as int64."""
    if width == 1:
        return u8[at].astype(np.int64)
    octets = _gather(u8, at, width)
    return octets.view(">u4" if width == 4 else ">u8").reshape(len(at)).astype(np.int64)


def _views(u8: np.ndarray, buffer: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, vtype) -> pa.Array:
    """A binary_view/string_view array of the values at [starts, starts + lengths) of ``buffer``
    (``u8``: the same octets, padded).

    Layout of a view (Arrow columnar format): int32 length, then either the value zero-padded
    to 12 octets (length <= 12) or a 4-octet prefix, the buffer index and the int32 position.
    """
    n = len(starts)
    views = np.empty((n, 16), dtype=np.uint8)
    views[:, 0:4] = lengths.astype("<i4").view(np.uint8).reshape(n, 4)
    head = _gather(u8, starts, _INLINE)
    # zero what follows a short value: AND with a per-length mask, three uint32 words per row
    words = head.view(np.uint32)
    words &= _MASKS[np.minimum(lengths, _INLINE)]
    views[:, 4:16] = head
    long = lengths > _INLINE
    if long.any():
        views[long, 8:12] = 0
        views[long, 12:16] = starts[long].astype("<i4").view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(vtype, n, [None, pa.py_buffer(views), buffer])


def _names(column: pa.Array) -> pa.Array:
    """A binary column of exchange or routing key names as strings (U+FFFD for invalid UTF-8,
    as ``properties`` renders text: Arrow strings must be UTF-8)."""
    try:
        return column.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in column.to_pylist()],
                        type=pa.string())


def _constant_string(value: str, n: int) -> pa.Array:
    octets = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(octets)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(octets * n)])


def _property_columns(props: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(headers, properties) columns of a binary column of encoded property lists."""
    encoded = pc.dictionary_encode(props)
    distinct = encoded.dictionary.to_pylist()
    decoded = [properties.decode(raw) for raw in distinct]
    headers = pa.array([h for h, _ in decoded], type=HEADERS_TYPE)
    children = [
        pa.array([values[i] for _, values in decoded], type=field.type)
        for i, field in enumerate(PROPERTIES_TYPE)
    ]
    structs = pa.StructArray.from_arrays(children, fields=list(PROPERTIES_TYPE))
    indices = encoded.indices
    return headers.take(indices), structs.take(indices)


def build_batch(bodies: pa.Array, routing_keys: pa.Array, exchanges: pa.Array, props: pa.Array,
                offsets, stream: str) -> pa.RecordBatch:
    """A record batch of the schema from columns: names as strings, property lists as binary."""
    headers, structs = _property_columns(props)
    n = len(bodies)
    return pa.RecordBatch.from_arrays(
        [bodies, routing_keys, exchanges, headers, structs, pa.array(offsets, type=pa.int64()),
         _constant_string(stream, n)],
        schema=ARROW_SCHEMA,
    )


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)


def _check_crcs(data, positions: np.ndarray, ends: np.ndarray, offsets: np.ndarray) -> None:
    crc32 = zlib.crc32
    mv = memoryview(data)
    try:
        for pos, end, offset in zip(positions.tolist(), ends.tolist(), offsets.tolist()):
            (crc,) = _U32.unpack_from(mv, pos)
            if crc32(mv[pos + ENTRY_HEADER_SIZE:end], crc32(mv[pos + 4:pos + ENTRY_HEADER_SIZE])) != crc:
                raise ValueError(f"CRC mismatch in the entry of offset {offset}")
    finally:
        mv.release()


def parse_bulk(data: bytes, stream: str, verify: bool = False) -> pa.RecordBatch:
    """The rows of ``data`` (BULK FORMAT, whole entries) read from stream ``stream``.

    ValueError if an entry is cut short, a record inside it is malformed, or (``verify``) a
    CRC does not match.
    """
    positions = entry_positions(data)
    n = len(positions)
    if n == 0:
        return empty_batch()
    size = len(data)
    u8 = _padded(data)
    offsets = _be(u8, positions + 4, 8)
    record = positions + ENTRY_HEADER_SIZE
    ends = record + _be(u8, positions + 20, 4)
    if verify:
        _check_crcs(data, positions, ends, offsets)
    # record layout: exchange (shortstr), routing key (shortstr), properties (longstr), body;
    # a damaged length could point anywhere, so positions are clipped and the result checked
    ex_len = _be(u8, np.minimum(record, size), 1)
    rk_at = record + 1 + ex_len
    rk_len = _be(u8, np.minimum(rk_at, size), 1)
    props_at = rk_at + 1 + rk_len
    props_len = _be(u8, np.minimum(props_at, size), 4)
    body_at = props_at + 4 + props_len
    bad = body_at > ends
    if bad.any():
        raise ValueError(f"malformed message record at offset {int(offsets[bad.argmax()])}")
    buffer = pa.py_buffer(data)
    bodies = _views(u8, buffer, body_at, ends - body_at, pa.binary_view()).cast(pa.binary())
    exchanges = _names(_views(u8, buffer, record + 1, ex_len, pa.binary_view()).cast(pa.binary()))
    routing_keys = _names(_views(u8, buffer, rk_at + 1, rk_len, pa.binary_view()).cast(pa.binary()))
    props = _views(u8, buffer, props_at + 4, props_len, pa.binary_view()).cast(pa.binary())
    return build_batch(bodies, routing_keys, exchanges, props, offsets, stream)
