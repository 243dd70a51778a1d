"""Whole AMQP publishes (method, content header and body frames) for a batch of rows at once.

The common write (a ``body`` column, a routing key and an exchange from the options or from
columns, no ``headers``/``properties`` columns) needs, per row, only the frame sizes, the
message id ``<query>:<batch>:<partition>:<row>`` (in ``message_id`` and the deduplication
header) and the body. Building those octets row by row in Python costs microseconds per row;
here every piece is an Arrow column (fixed-width integers from numpy, the ids from Arrow's
integer-to-string cast) and Arrow's ``binary_join_element_wise`` concatenates them per row in
C++: the result is one buffer holding every publish of the batch, back to back, which the
publisher sends as it is (``ConfirmPublisher.publish_frames``).

The frames are exactly what ``MessageEncoder`` + ``ConfirmPublisher.publish`` produce for the
same rows (tests/spark/write/test_frames.py compares them). Rows this cannot encode (a
property column, a body larger than a frame, a name over 255 octets) return None, and the
caller takes the row-by-row path, which raises the proper errors.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warren.codec.fields import encode_shortstr
from warren.codec.properties import HEADERS_FLAG, MESSAGE_ID_FLAG

__all__ = ["batch_publishes", "octets_of", "FAST_COLUMNS"]

# the columns the batch path handles; any other (headers, properties, message_id,
# content_type) takes the row-by-row path
FAST_COLUMNS = frozenset({"body", "routing_key", "exchange", "offset", "stream", "timestamp"})

_METHOD_HEAD = pa.scalar(b"\x01\x00\x01", pa.binary())  # frame type 1, channel 1
_PUBLISH_HEAD = pa.scalar(b"\x00\x3c\x00\x28\x00\x00", pa.binary())  # basic.publish, ticket 0
_HEADER_HEAD = pa.scalar(b"\x02\x00\x01", pa.binary())
_HEADER_CLASS = pa.scalar(b"\x00\x3c\x00\x00", pa.binary())  # class basic, weight 0
_BODY_HEAD = pa.scalar(b"\x03\x00\x01", pa.binary())
_END = pa.scalar(b"\xce", pa.binary())
_EMPTY = pa.scalar(b"", pa.binary())


def _be(values: np.ndarray, width: int) -> pa.Array:
    """Unsigned big-endian integers of ``width`` octets, one binary value per row."""
    raw = np.ascontiguousarray(values, dtype=f">u{width}")
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(raw), [None, pa.py_buffer(raw)])
    return fixed.cast(pa.binary())


def _names(fixed: str | None, column, n: int):
    """Exchange or routing key octets: the option's value as a scalar, else the column (null
    = ""); with their lengths (numpy)."""
    if fixed is not None or column is None:
        octets = (fixed or "").encode("utf-8", "surrogateescape")
        return pa.scalar(octets, pa.binary()), np.full(n, len(octets), dtype=np.int64)
    values = pc.fill_null(column.cast(pa.binary()), _EMPTY)
    return values, pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)


def batch_publishes(batch: pa.RecordBatch, exchange: str | None, routing_key: str | None, mandatory: bool,
                    id_prefix: str, first_row: int, dedup_header: str | None, body_max: int) -> pa.Array | None:
    """One binary value per row: its whole publish on channel 1 (see the module docstring), or
    None when a row needs the row-by-row path."""
    names = set(batch.schema.names)
    if not names <= FAST_COLUMNS or "body" not in names:
        return None
    n = batch.num_rows
    body = batch.column(batch.schema.get_field_index("body"))
    body = pc.fill_null(body.cast(pa.binary()), _EMPTY)
    body_len = pc.binary_length(body).to_numpy(zero_copy_only=False).astype(np.int64)
    if n and int(body_len.max()) > body_max:
        return None
    ex, ex_len = _names(exchange, batch.column(batch.schema.get_field_index("exchange"))
                        if "exchange" in names and exchange is None else None, n)
    rk, rk_len = _names(routing_key, batch.column(batch.schema.get_field_index("routing_key"))
                        if "routing_key" in names and routing_key is None else None, n)
    if n and (int(ex_len.max()) > 255 or int(rk_len.max()) > 255):
        return None
    rows = pa.array(np.arange(first_row, first_row + n, dtype=np.int64)).cast(pa.string()).cast(pa.binary())
    ids = pc.binary_join_element_wise(pa.scalar(id_prefix.encode("utf-8", "surrogateescape"), pa.binary()), rows,
                                      _EMPTY)
    id_len = pc.binary_length(ids).to_numpy(zero_copy_only=False).astype(np.int64)
    if n and int(id_len.max()) > 255:
        return None
    id_short = [_be(id_len, 1), ids]
    if dedup_header is None:
        props = [pa.scalar(MESSAGE_ID_FLAG.to_bytes(2, "big"), pa.binary()), *id_short]  # message-id only
        props_len = 2 + 1 + id_len
    else:
        name = encode_shortstr(dedup_header)
        table_len = len(name) + 1 + 4 + id_len
        props = [pa.scalar((HEADERS_FLAG | MESSAGE_ID_FLAG).to_bytes(2, "big"), pa.binary()), _be(table_len, 4), pa.scalar(name + b"S", pa.binary()),
                 _be(id_len, 4), ids, *id_short]  # headers {dedup: id} and message-id
        props_len = 2 + 4 + table_len + 1 + id_len
    method_len = 9 + ex_len + rk_len
    ex_short = [_be(ex_len, 1), ex] if not isinstance(ex, pa.Scalar) else \
        [pa.scalar(bytes([len(ex.as_py())]) + ex.as_py(), pa.binary())]
    rk_short = [_be(rk_len, 1), rk] if not isinstance(rk, pa.Scalar) else \
        [pa.scalar(bytes([len(rk.as_py())]) + rk.as_py(), pa.binary())]
    body_frame = pc.binary_join_element_wise(_BODY_HEAD, _be(body_len, 4), body, _END, _EMPTY)
    body_frame = pc.if_else(pa.array(body_len > 0), body_frame, _EMPTY)  # an empty body has no body frame
    pieces = [
        _METHOD_HEAD, _be(method_len, 4), _PUBLISH_HEAD, *ex_short, *rk_short,
        pa.scalar(b"\x01\xce" if mandatory else b"\x00\xce", pa.binary()),
        _HEADER_HEAD, _be(12 + props_len, 4), _HEADER_CLASS, _be(body_len, 8), *props, _END,
        body_frame,
    ]
    return pc.binary_join_element_wise(*pieces, _EMPTY)


def octets_of(values: pa.Array) -> memoryview:
    """The octets of the consecutive values of a binary array (or a slice of one), no copy."""
    _, offsets, data = values.buffers()
    at = np.frombuffer(offsets, dtype=np.int32, count=values.offset + len(values) + 1)
    first, last = int(at[values.offset]), int(at[values.offset + len(values)])
    return memoryview(data)[first:last]
