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
4. property lists become the property columns in ``property_columns.py`` (decoded once when
   all rows share one list, once per distinct list, or field by field with numpy when most
   lists differ).

Only the columns of the read schema are built (``columns``), in its order: a job that reads
``body`` and ``offset`` pays for nothing else. The HTTP reader hands over the answer already
in a padded numpy buffer (``parse_padded``), so the octets are copied once, from the socket.

CRCs are checked only when asked (``verify=True``): the broker checked them when it wrote and
recovered its segments, TCP checks the transfer, and checking costs a Python call per entry.
"""

from __future__ import annotations

import struct
import threading
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warren.spark.read.gather import BufferPool, be_uint, padded, views
from warren.spark.read.property_columns import (
    HEADERS_TYPE, PROPERTIES_TYPE, PROPERTY_COLUMNS, property_columns, text_column,
)
from warren.spark.schema import COLUMNS, DEFAULT_COLUMNS
from warren.codec.bulk_records import ENTRY_HEADER_SIZE

__all__ = [
    "ARROW_TYPES", "ARROW_SCHEMA", "FULL_ARROW_SCHEMA", "PROPERTIES_TYPE", "HEADERS_TYPE", "arrow_schema",
    "entry_positions", "parse_bulk", "parse_padded", "empty_batch", "batch_from_parts",
]

# exactly what pyspark derives from the schema's DDL (to_arrow_schema, timezone UTC): it refuses
# a batch whose schema differs in anything, nullability included (tests/spark/read/test_records.py)
ARROW_TYPES = {
    "body": pa.binary(), "routing_key": pa.string(), "exchange": pa.string(), "offset": pa.int64(),
    "stream": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"), "message_id": pa.string(),
    "content_type": pa.string(), "headers": HEADERS_TYPE, "properties": PROPERTIES_TYPE,
    "property_list": pa.binary(),
}


def arrow_schema(columns=DEFAULT_COLUMNS, nullable=None, headers=None) -> pa.Schema:
    """The Arrow schema of a batch of ``columns`` (``nullable``: one flag per column, default
    all; ``headers``: (name, nullable) of each header when that column is a struct of chosen
    headers, ``schema.named_headers``)."""
    flags = nullable or (True,) * len(columns)
    types = dict(ARROW_TYPES)
    if headers is not None:
        types["headers"] = pa.struct([pa.field(name, pa.string(), flag) for name, flag in headers])
    return pa.schema([pa.field(c, types[c], flag) for c, flag in zip(columns, flags)])


ARROW_SCHEMA = arrow_schema(DEFAULT_COLUMNS)
FULL_ARROW_SCHEMA = arrow_schema(COLUMNS)
# the broker's timestamps (ms) that Spark can hold: years 1 to 9999
_MIN_MS, _MAX_MS = -62_135_596_800_000, 253_402_300_799_999

_U32 = struct.Struct(">I")


def entry_positions(data) -> np.ndarray:
    """The position of every entry's header in ``data`` (int64); ValueError if one is cut short."""
    return _entry_layout(data)[0]


def _entry_layout(data) -> tuple[np.ndarray, int | None]:
    """(``entry_positions``, the size of every entry when they all have the same, else None)."""
    size = len(data)
    if size == 0:
        return np.zeros(0, dtype=np.int64), None
    if size < ENTRY_HEADER_SIZE:
        raise ValueError(f"entry header cut short at 0 ({size} octets)")
    (first_len,) = _U32.unpack_from(data, 20)
    step = ENTRY_HEADER_SIZE + first_len
    if size % step == 0:
        positions = np.arange(0, size, step, dtype=np.int64)
        lengths = np.ndarray(shape=(len(positions),), dtype=">u4", buffer=data, offset=20, strides=(step,))
        if (lengths == first_len).all():
            return positions, step
    return _positions_loop(data, size), None


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


def _names(column: pa.Array) -> pa.Array:
    """Exchange or routing key names as strings (U+FFFD for invalid UTF-8, as ``properties``
    renders text: Arrow strings must be UTF-8)."""
    return text_column(column)


# columns and offsets every batch of a read has alike (the stream's name, one routing key, the
# offsets of values of one width), built once: Arrow arrays and buffers are immutable, so
# batches may share them; only the last few and small ones are kept
_SHARED: dict = {}
_SHARED_KEPT = 8
_SHARED_MAX_OCTETS = 1 << 20
_SHARED_LOCK = threading.Lock()  # reads in several threads of one process may parse at once


def _shared(key, octets: int, build):
    found = _SHARED.get(key)
    if found is None:
        found = build()
        if octets <= _SHARED_MAX_OCTETS:
            with _SHARED_LOCK:
                if len(_SHARED) >= _SHARED_KEPT:
                    del _SHARED[next(iter(_SHARED))]  # the oldest
                _SHARED[key] = found
    return found


def _offsets(n: int, width: int) -> pa.Buffer:
    """The int32 offsets of ``n`` values of ``width`` octets each."""
    return _shared(("offsets", n, width), 4 * (n + 1),
                   lambda: pa.py_buffer(np.arange(n + 1, dtype=np.int32) * np.int32(width)))


def _constant_string(value: str, n: int) -> pa.Array:
    octets = value.encode("utf-8")
    return _shared(("text", octets, n), (len(octets) + 4) * n, lambda: pa.Array.from_buffers(
        pa.string(), n, [None, _offsets(n, len(octets)), pa.py_buffer(octets * n)]))


def _timestamps(ms: np.ndarray) -> pa.Array:
    """Broker timestamps in milliseconds as a UTC timestamp column (outside years 1-9999: null)."""
    ok = (ms >= _MIN_MS) & (ms <= _MAX_MS)
    micros = np.where(ok, ms, 0) * 1000
    return pa.array(micros, type=ARROW_TYPES["timestamp"], mask=None if ok.all() else ~ok)


def _named_headers(headers: pa.Array, typ: pa.StructType) -> pa.Array:
    """The ``headers`` map column as the struct of the headers ``typ`` names (a field is null
    where its header is absent, the struct where the message has no headers)."""
    if headers.type == typ:
        return headers
    if headers.null_count == len(headers):
        return pa.nulls(len(headers), typ)
    children = [pc.map_lookup(headers, pa.scalar(f.name, pa.string()), "first") for f in typ]
    return pa.StructArray.from_arrays(children, fields=list(typ), mask=headers.is_null())


def _assemble(built: dict, schema: pa.Schema, n: int) -> pa.RecordBatch:
    """The batch of ``schema`` from the columns built (a column missing there is null)."""
    arrays = [built[f.name] if built.get(f.name) is not None else pa.nulls(n, f.type) for f in schema]
    if "headers" in schema.names and pa.types.is_struct(schema.field("headers").type):
        at = schema.names.index("headers")
        arrays[at] = _named_headers(arrays[at], schema.field("headers").type)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def empty_batch(schema: pa.Schema = ARROW_SCHEMA) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


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


def parse_bulk(data, stream: str, verify: bool = False, schema: pa.Schema = ARROW_SCHEMA) -> pa.RecordBatch:
    """The rows of ``data`` (BULK FORMAT, whole entries) read from stream ``stream``, with the
    columns of ``schema`` (an ``arrow_schema``).

    ValueError if an entry is cut short, a record inside it is malformed, or (``verify``) a
    CRC does not match.
    """
    return parse_padded(padded(data), len(data), stream, verify, schema)


def parse_padded(u8: np.ndarray, size: int, stream: str, verify: bool = False,
                 schema: pa.Schema = ARROW_SCHEMA, pool: BufferPool | None = None) -> pa.RecordBatch:
    """``parse_bulk`` of the ``size`` octets at the start of ``u8``, which has at least ``PAD``
    octets after them (their values do not matter); ``pool``: where the values copied out
    of uniform entries go (``_parse_uniform``)."""
    data = memoryview(u8)[:size]
    positions, step = _entry_layout(data)
    n = len(positions)
    if n == 0:
        return empty_batch(schema)
    if step is not None and not verify:
        batch = _parse_uniform(u8, n, step, stream, schema, pool)
        if batch is not None:
            return batch
    wanted = set(schema.names)
    offsets = be_uint(u8, positions + 4, 8)
    record = positions + ENTRY_HEADER_SIZE
    ends = record + be_uint(u8, positions + 20, 4)
    if verify:
        _check_crcs(data, positions, ends, offsets)
    # record layout: exchange (shortstr), routing key (shortstr), properties (longstr), body;
    # a damaged length could point anywhere, so positions are clipped and the result checked
    ex_len = be_uint(u8, np.minimum(record, size), 1)
    rk_at = record + 1 + ex_len
    rk_len = be_uint(u8, np.minimum(rk_at, size), 1)
    props_at = rk_at + 1 + rk_len
    props_len = be_uint(u8, np.minimum(props_at, size), 4)
    body_at = props_at + 4 + props_len
    bad = body_at > ends
    if bad.any():
        raise ValueError(f"malformed message record at offset {int(offsets[bad.argmax()])}")
    buffer = pa.py_buffer(u8)
    built: dict = {"offset": pa.array(offsets, type=pa.int64())}
    if "body" in wanted:
        built["body"] = views(u8, buffer, body_at, ends - body_at).cast(pa.binary())
    if "exchange" in wanted:
        built["exchange"] = text_column(views(u8, buffer, record + 1, ex_len))
    if "routing_key" in wanted:
        built["routing_key"] = text_column(views(u8, buffer, rk_at + 1, rk_len))
    if "timestamp" in wanted:
        built["timestamp"] = _timestamps(be_uint(u8, positions + 12, 8))
    if "stream" in wanted:
        built["stream"] = _constant_string(stream, n)
    if "property_list" in wanted:
        built["property_list"] = views(u8, buffer, props_at + 4, props_len).cast(pa.binary())
    if wanted & set(PROPERTY_COLUMNS):
        built.update(property_columns(u8, buffer, props_at + 4, props_len, wanted))
    return _assemble(built, schema, n)


def _strided(u8: np.ndarray, n: int, step: int, at: int, dtype) -> np.ndarray:
    """The value of ``dtype`` at octet ``at`` of each of ``n`` entries of ``step`` octets (a view)."""
    return np.ndarray(shape=(n,), dtype=dtype, buffer=u8, offset=at, strides=(step,))


def _strided_octets(u8: np.ndarray, n: int, step: int, at: int, width: int) -> np.ndarray:
    """The ``width`` octets at octet ``at`` of each entry, as an (n, width) view."""
    return np.ndarray(shape=(n, width), dtype=np.uint8, buffer=u8, offset=at, strides=(step, 1))


def _fixed_width(u8: np.ndarray, n: int, step: int, at: int, width: int, typ,
                 pool: BufferPool | None = None) -> pa.Array:
    """A binary (or string, unchecked) array of the ``width`` octets at octet ``at`` of each of
    ``n`` entries of ``step`` octets, copied once (into a buffer of ``pool`` if given). Each
    value is copied as one item of ``width`` octets (numpy copies the rows of an (n, width)
    uint8 view octet by octet, several times slower)."""
    if width == 0:
        return pa.Array.from_buffers(typ, n, [None, _offsets(n, 0), pa.py_buffer(b"")])
    out = np.empty(n * width, dtype=np.uint8) if pool is None else pool.take(n * width)
    values = np.ndarray(shape=(n,), dtype=np.dtype((np.void, width)), buffer=u8, offset=at, strides=(step,))
    np.copyto(out.view(np.dtype((np.void, width))), values)
    return pa.Array.from_buffers(typ, n, [None, _offsets(n, width), pa.py_buffer(out)])


def _all_same(u8: np.ndarray, n: int, step: int, at: int, width: int) -> bool:
    """Whether the ``width`` octets at octet ``at`` are the same in each of ``n`` entries of
    ``step`` octets: compared eight octets at a time (the last word overlapping the one
    before), short values octet by octet."""
    if width < 8:
        octets = _strided_octets(u8, n, step, at, width)
        return bool((octets == octets[0]).all())
    for k in (*range(0, width - 8, 8), width - 8):
        words = _strided(u8, n, step, at + k, np.uint64)
        if not (words == words[0]).all():
            return False
    return True


def _fixed_text(u8: np.ndarray, n: int, step: int, at: int, width: int) -> pa.Array:
    """Names of one width as strings: one value repeated (checked once), or each row's."""
    if width == 0 or _all_same(u8, n, step, at, width):
        return _constant_string(bytes(u8[at:at + width]).decode("utf-8", "replace"), n)
    return text_column(_fixed_width(u8, n, step, at, width, pa.binary()))


def _int64s(values: np.ndarray, pool: BufferPool | None) -> pa.Array:
    """An int64 column of ``values`` (any integer view), converted into a buffer of ``pool``."""
    out = np.empty(len(values), dtype=np.int64) if pool is None else pool.take(8 * len(values)).view(np.int64)
    np.copyto(out, values, casting="unsafe")
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(out)])


def _parse_uniform(u8: np.ndarray, n: int, step: int, stream: str, schema: pa.Schema,
                   pool: BufferPool | None = None) -> pa.RecordBatch | None:
    """``parse_padded`` of ``n`` entries of ``step`` octets each whose records all have the same
    layout (exchange, routing key and property list lengths): every value is then at the same
    place in each entry, read through strided views with no gather (a stream of one publisher's
    messages of one size, the common case). None when the layouts differ."""
    base = ENTRY_HEADER_SIZE
    if base + 2 > step:
        return None
    ex_len = _strided(u8, n, step, base, np.uint8)
    e = int(ex_len[0])
    if (ex_len != e).any() or base + 2 + e > step:
        return None  # (a damaged length: the general path names the offset)
    rk_len = _strided(u8, n, step, base + 1 + e, np.uint8)
    r = int(rk_len[0])
    if (rk_len != r).any():
        return None
    props_at = base + 2 + e + r
    if props_at + 4 > step:
        return None
    props_len = _strided(u8, n, step, props_at, ">u4")
    p = int(props_len[0])
    if (props_len != p).any():
        return None
    body_at = props_at + 4 + p
    if body_at > step:
        return None  # malformed: the general path names the offset
    wanted = set(schema.names)
    built: dict = {"offset": _int64s(_strided(u8, n, step, 4, ">i8"), pool)}
    if "body" in wanted:
        built["body"] = _fixed_width(u8, n, step, body_at, step - body_at, pa.binary(), pool)
    if "exchange" in wanted:
        built["exchange"] = _fixed_text(u8, n, step, base + 1, e)
    if "routing_key" in wanted:
        built["routing_key"] = _fixed_text(u8, n, step, base + 2 + e, r)
    if "timestamp" in wanted:
        built["timestamp"] = _timestamps(_strided(u8, n, step, 12, ">i8").astype(np.int64))
    if "stream" in wanted:
        built["stream"] = _constant_string(stream, n)
    if "property_list" in wanted:
        built["property_list"] = _fixed_width(u8, n, step, props_at + 4, p, pa.binary(), pool)
    if wanted & set(PROPERTY_COLUMNS):
        starts = np.arange(props_at + 4, props_at + 4 + n * step, step, dtype=np.int64)
        built.update(property_columns(u8, pa.py_buffer(u8), starts, np.full(n, p, dtype=np.int64), wanted))
    return _assemble(built, schema, n)


def batch_from_parts(bodies: list, routing_keys: list, exchanges: list, props: list, offsets: list | None,
                     stream: str | None, schema: pa.Schema = ARROW_SCHEMA) -> pa.RecordBatch:
    """A batch from per-message values (the AMQP path; a classic queue's deliveries with
    offsets and stream None): property lists as encoded octets, decoded as the bulk path does.
    The broker's timestamp is not in an AMQP delivery: that column is null."""
    n = len(bodies)
    wanted = set(schema.names)
    built: dict = {}
    if "body" in wanted:
        built["body"] = pa.array(bodies, type=pa.binary())
    if "routing_key" in wanted:
        built["routing_key"] = _text_array(routing_keys)
    if "exchange" in wanted:
        built["exchange"] = _text_array(exchanges)
    if offsets is not None:
        built["offset"] = pa.array(offsets, type=pa.int64())
    if stream is not None and "stream" in wanted:
        built["stream"] = _constant_string(stream, n)
    if "property_list" in wanted:
        built["property_list"] = pa.array([bytes(p) for p in props], type=pa.binary())
    if wanted & set(PROPERTY_COLUMNS):
        joined = b"".join(props)
        lengths = np.fromiter((len(p) for p in props), dtype=np.int64, count=n)
        starts = np.cumsum(lengths) - lengths
        built.update(property_columns(padded(joined), pa.py_buffer(joined), starts, lengths, wanted))
    return _assemble(built, schema, n)


def _text_array(values: list) -> pa.Array:
    """Names as strings: bytes decoded as UTF-8 and invalid sequences (or lone surrogates from a
    ``surrogateescape`` decode) replaced, as the bulk path does."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowException, UnicodeError):
        return pa.array([None if v is None else
                         (v if isinstance(v, str) else bytes(v).decode("utf-8", "surrogateescape"))
                         .encode("utf-8", "surrogateescape").decode("utf-8", "replace") for v in values],
                        type=pa.string())
