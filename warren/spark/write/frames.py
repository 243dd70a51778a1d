"""Whole AMQP publishes (method, content header and body frames) for a batch of rows at once.

The common write (a ``body`` column, a routing key and an exchange from the options or from
columns, no ``headers``/``properties`` columns) needs, per row, only the frame sizes, the
message id ``<query>:<batch>:<partition>:<row>`` (in ``message_id`` and the deduplication
header) and the body. Building those octets row by row in Python costs microseconds per row;
here the fixed-width parts of a row (frame heads, sizes, flags: constants and numpy integers)
are numpy records, the ids come from Arrow's integer-to-string cast, and one Arrow
``binary_join_element_wise`` concatenates the pieces per row in C++, copying each body once:
the result is one buffer holding every publish of the batch, back to back, which the publisher
sends as it is (``ConfirmPublisher.publish_frames``).

The frames are exactly what ``MessageEncoder`` + ``ConfirmPublisher.publish`` produce for the
same rows (tests/spark/write/test_frames.py compares them). Rows this cannot encode (a
property column, a body larger than a frame, a name over 255 octets) return None, and the
caller takes the row-by-row path, which raises the proper errors.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warren.spec.fields import encode_shortstr
from warren.codec.properties import HEADERS_FLAG, MESSAGE_ID_FLAG

__all__ = ["batch_publishes", "octets_of", "FAST_COLUMNS"]

# the columns the batch path handles; any other (headers, properties, message_id,
# content_type) takes the row-by-row path
FAST_COLUMNS = frozenset({"body", "routing_key", "exchange", "offset", "stream", "timestamp"})

_METHOD_HEAD = b"\x01\x00\x01"  # frame type 1, channel 1
_PUBLISH_HEAD = b"\x00\x3c\x00\x28\x00\x00"  # basic.publish, ticket 0
_HEADER_HEAD = b"\x02\x00\x01"
_HEADER_CLASS = b"\x00\x3c\x00\x00"  # class basic, weight 0
_BODY_HEAD = b"\x03\x00\x01"
_END = b"\xce"
_EMPTY = pa.scalar(b"", pa.binary())
_OFFSETS_MAX = (1 << 31) - 1  # a binary array's int32 offsets: one batch's publishes stay below 2 GiB


class _RowOctets:
    """The pieces of every row's octets, in order, joined at the end by one
    ``binary_join_element_wise``. Runs of fixed-width pieces (constant octets and big-endian
    integers, one per row) become one numpy record per row, viewed as one binary column, so
    the join copies a handful of pieces per row, not one per field; variable pieces (the ids,
    names from columns, the body) are binary columns joined as they are, each copied once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.pieces: list = []
        self._fixed: list[tuple[str, object]] = []  # (numpy type, value: octets or per-row integers)

    def octets(self, value: bytes) -> None:
        if value:
            self._fixed.append((f"S{len(value)}", value))

    def uint(self, values: np.ndarray, width: int) -> None:
        self._fixed.append((f">u{width}", values))

    def column(self, values) -> None:
        self._close_fixed()
        self.pieces.append(values)

    def _close_fixed(self) -> None:
        fixed, self._fixed = self._fixed, []
        if not fixed:
            return
        if all(kind.startswith("S") for kind, _ in fixed):  # constant octets only: one scalar
            self.pieces.append(pa.scalar(b"".join(value for _, value in fixed), pa.binary()))
            return
        record = np.empty(self.n, dtype=[(f"f{i}", kind) for i, (kind, _) in enumerate(fixed)])
        for i, (_, value) in enumerate(fixed):
            record[f"f{i}"] = value
        width = record.dtype.itemsize
        offsets = np.arange(0, (self.n + 1) * width, width, dtype=np.int32)
        self.pieces.append(pa.Array.from_buffers(pa.binary(), self.n, [None, pa.py_buffer(offsets),
                                                                       pa.py_buffer(record.view(np.uint8))]))

    def join(self) -> pa.Array:
        self._close_fixed()
        return pc.binary_join_element_wise(*self.pieces, _EMPTY)


def _names(fixed: str | None, column, n: int):
    """Exchange or routing key octets: the option's value (octets), else the column (null =
    ""); with their lengths (numpy)."""
    if fixed is not None or column is None:
        octets = (fixed or "").encode("utf-8", "surrogateescape")
        return octets, np.full(n, len(octets), dtype=np.int64)
    values = _no_nulls(column.cast(pa.binary()))
    return values, pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)


def _no_nulls(values: pa.Array) -> pa.Array:
    return pc.fill_null(values, _EMPTY) if values.null_count else values


def _short(rows: _RowOctets, value, lengths: np.ndarray) -> None:
    """A shortstr: constant octets, or a column with its lengths."""
    if isinstance(value, bytes):
        rows.octets(bytes([len(value)]) + value)
    else:
        rows.uint(lengths, 1)
        rows.column(value)


def batch_publishes(batch: pa.RecordBatch, exchange: str | None, routing_key: str | None, mandatory: bool,
                    id_prefix: str, first_row: int, dedup_header: str | None, body_max: int) -> pa.Array | None:
    """One binary value per row: its whole publish on channel 1 (see the module docstring), or
    None when a row needs the row-by-row path."""
    names = set(batch.schema.names)
    if not names <= FAST_COLUMNS or "body" not in names:
        return None
    n = batch.num_rows
    body = _no_nulls(batch.column(batch.schema.get_field_index("body")).cast(pa.binary()))
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
    if dedup_header is None:
        props_len = 2 + 1 + id_len  # message-id only
    else:
        name = encode_shortstr(dedup_header)
        table_len = len(name) + 1 + 4 + id_len
        props_len = 2 + 4 + table_len + 1 + id_len  # headers {dedup: id} and message-id
    nonempty = body_len > 0  # an empty body has no body frame
    frame_len = np.where(nonempty, 8 + body_len, 0)
    total = 12 + 9 + ex_len + rk_len + 8 + 12 + props_len + frame_len
    if n and int(total.sum()) > _OFFSETS_MAX:
        return None

    out = _RowOctets(n)
    out.octets(_METHOD_HEAD)
    out.uint(9 + ex_len + rk_len, 4)
    out.octets(_PUBLISH_HEAD)
    _short(out, ex, ex_len)
    _short(out, rk, rk_len)
    out.octets(b"\x01\xce" if mandatory else b"\x00\xce")
    out.octets(_HEADER_HEAD)
    out.uint(12 + props_len, 4)
    out.octets(_HEADER_CLASS)
    out.uint(body_len, 8)
    if dedup_header is None:
        out.uint(np.full(n, MESSAGE_ID_FLAG, dtype=np.int64), 2)
    else:
        out.uint(np.full(n, HEADERS_FLAG | MESSAGE_ID_FLAG, dtype=np.int64), 2)
        out.uint(table_len, 4)
        out.octets(name + b"S")
        out.uint(id_len, 4)
        out.column(ids)
    out.uint(id_len, 1)
    out.column(ids)
    out.octets(_END)
    if nonempty.all():
        out.octets(_BODY_HEAD)
        out.uint(body_len, 4)
        out.column(body)
        out.octets(_END)
    else:  # the body frame's head and end only where there is a body (the body column is "" elsewhere)
        head = np.empty(n, dtype=[("type", "S3"), ("size", ">u4")])
        head["type"], head["size"] = _BODY_HEAD, body_len
        out.column(_where(nonempty, head.view(np.uint8), 7))
        out.column(body)
        out.column(_where(nonempty, np.frombuffer(_END * n, dtype=np.uint8), 1))
    return out.join()


def _where(keep: np.ndarray, octets: np.ndarray, width: int) -> pa.Array:
    """Rows of ``width`` octets each (``octets``, row after row), empty where ``keep`` is false."""
    lengths = np.where(keep, width, 0).astype(np.int32)
    offsets = np.zeros(len(keep) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = octets.reshape(-1, width)[keep].reshape(-1)
    return pa.Array.from_buffers(pa.binary(), len(keep), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def octets_of(values: pa.Array) -> memoryview:
    """The octets of the consecutive values of a binary array (or a slice of one), no copy."""
    _, offsets, data = values.buffers()
    at = np.frombuffer(offsets, dtype=np.int32, count=values.offset + len(values) + 1)
    first, last = int(at[values.offset]), int(at[values.offset + len(values)])
    return memoryview(data)[first:last]
