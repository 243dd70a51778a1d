"""Rows of an Arrow RecordBatch to AMQP messages: exchange, routing key, encoded properties, body.

Spark hands the writer Arrow batches (``DataSourceArrowWriter``), so each column is converted
to Python once per batch (``to_pylist``) and the per-row loop only assembles properties.

Every message gets an id that is the same each time Spark runs the same rows again:
``<query>:<batch>:<partition>:<row>`` (row = position in the task's input). It goes into the
``message_id`` property unless the row brings its own, and always into the deduplication
header (default ``x-deduplication-header``, ``warren/broker/dedup.py``), so an exchange or
queue declared with ``x-message-deduplication: true`` drops the copies a retried task or a
replayed micro-batch publishes again. The id is only as stable as the rows: it assumes Spark
recomputes the same rows in the same order for a partition (true of files, stream offsets and
the rate source; not of a non-deterministic query such as one ordered by rand()).

A row with a ``property_list`` (the list as the publisher encoded it, kept by the reader) is
published with that list, octet for octet, with the changes the row's readable columns make to
it (``property_list.py``); no message id is added to it (its own is kept), only the
deduplication header when it is on (replay turns it off unless asked: jobs/replay.py).
"""

from __future__ import annotations

import struct

from warren.spec.fields import encode_shortstr
from warren.codec.properties import HEADERS_FLAG, MESSAGE_ID_FLAG
from warren.spark.options import WriteOptions
from warren.spark.amqp_link import parse_url
from warren.spark.write import property_list
from warren.spark.write.columns import FLAT_PROPERTIES, RowLayout
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["MessageEncoder"]

_U32 = struct.Struct(">I")
# the property flag words of the two lists spliced here: message-id only; headers and message-id
_ID_ONLY_WORD = MESSAGE_ID_FLAG.to_bytes(2, "big")
_HEADERS_AND_ID_WORD = (HEADERS_FLAG | MESSAGE_ID_FLAG).to_bytes(2, "big")
_TIMESTAMP_DIVISORS = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


class MessageEncoder:
    """Turns batches of one task into publishes; ``rows`` counts the rows seen so far."""

    def __init__(self, layout: RowLayout, options: WriteOptions, id_prefix: str) -> None:
        self.layout = layout
        self.options = options
        self.id_prefix = id_prefix
        self.rows = 0
        self.user = parse_url(options.url).username if options.drop_foreign_user_id else None

    def messages(self, batch):
        """Yield ``(exchange, routing_key, properties, body)`` for each row of an Arrow batch."""
        n = batch.num_rows
        if not n:
            return
        names = batch.schema.names
        columns = {name: batch.column(i) for i, name in enumerate(names)}
        bodies = columns["body"].to_pylist()
        if self.layout.body_is_text:
            bodies = [b"" if b is None else b.encode("utf-8") for b in bodies]
        exchanges = _fixed_or_column(self.options.exchange, columns.get("exchange"), n)
        routing_keys = _fixed_or_column(self.options.routing_key, columns.get("routing_key"), n)
        first = self.rows
        self.rows += n
        flat = [(name, columns[name].to_pylist()) for name in FLAT_PROPERTIES if name in columns]
        if "headers" not in columns and "properties" not in columns and "property_list" not in columns and not flat:
            yield from self._id_only(bodies, exchanges, routing_keys, first)
            return
        headers = columns["headers"].to_pylist() if "headers" in columns else None
        props = _property_columns(columns["properties"]) if "properties" in columns else ()
        dedup = self.options.dedup_header
        prefix = self.id_prefix
        raws = columns["property_list"].to_pylist() if "property_list" in columns else None
        for i in range(n):
            message_id = f"{prefix}{first + i}"
            if raws is not None and raws[i] is not None:
                yield (exchanges[i], routing_keys[i], self._from_list(raws[i], headers, props, flat, i, message_id),
                       b"" if bodies[i] is None else bodies[i])
                continue
            p = BasicProperties()
            for name, values in props:
                setattr(p, name, values[i])
            for name, values in flat:  # a flat column's value wins over the struct's
                if values[i] is not None:
                    setattr(p, name, values[i])
            table = dict(headers[i]) if headers is not None and headers[i] else {}
            if dedup is not None:
                table[dedup] = message_id
            p.headers = table or None
            if p.message_id is None:
                p.message_id = message_id
            if self.user is not None and p.user_id not in (None, self.user):
                p.user_id = None
            body = bodies[i]
            yield exchanges[i], routing_keys[i], p.encode(), b"" if body is None else body


    def _from_list(self, raw: bytes, headers, props, flat, i: int, message_id: str) -> bytes:
        """The row's archived property list, with the row's edits, the deduplication header and
        (``dropForeignUserId``) without a user_id the broker would refuse."""
        raw = bytes(raw) or property_list.NO_PROPERTIES
        shown = {name: values[i] for name, values in props}
        for name, values in flat:  # as for rows without a list: a flat column's value wins when given
            if values[i] is not None:
                shown[name] = values[i]
        raw = property_list.merge_row(raw, headers[i] if headers is not None else None, headers is not None, shown)
        if self.user is not None and property_list.user_id_of(raw) not in (None, self.user):
            raw = property_list.without_user_id(raw)
        if self.options.dedup_header is not None:
            raw = property_list.set_header(raw, self.options.dedup_header, message_id)
        return raw

    def _id_only(self, bodies, exchanges, routing_keys, first: int):
        """Rows without headers or properties: the property list is the id alone (and the
        deduplication header), spliced from bytes, about five times faster than encoding a
        BasicProperties per row (the encoding is checked equal to it in the tests)."""
        prefix = self.id_prefix
        dedup = self.options.dedup_header
        if dedup is None:
            flags, name = _ID_ONLY_WORD, b""
        else:
            flags, name = _HEADERS_AND_ID_WORD, encode_shortstr(dedup)
        for i, body in enumerate(bodies):
            mid = f"{prefix}{first + i}".encode("utf-8", "surrogateescape")
            size = len(mid)  # below 256: WriteOptions bounds the writeId
            short = bytes((size,)) + mid
            if name:
                table = name + b"S" + _U32.pack(size) + mid
                properties = flags + _U32.pack(len(table)) + table + short
            else:
                properties = flags + short
            yield exchanges[i], routing_keys[i], properties, b"" if body is None else body


def _fixed_or_column(fixed: str | None, column, n: int) -> list[str]:
    """The option's value for every row, else the column's (null: "")."""
    if fixed is not None or column is None:
        return [fixed or ""] * n
    return [v or "" for v in column.to_pylist()]


def _property_columns(struct) -> list[tuple[str, list]]:
    """(property name, one value per row) for the fields of the properties struct column.

    ``flatten`` folds the struct's own nulls into its fields (a null struct: every property
    unset). Timestamps become whole seconds since the epoch, the AMQP timestamp.
    """
    out = []
    for field, child in zip(struct.type, struct.flatten()):
        if field.type.id == _timestamp_id():
            divisor = _TIMESTAMP_DIVISORS[field.type.unit]
            values = [None if v is None else v // divisor for v in child.cast("int64").to_pylist()]
        else:
            values = child.to_pylist()
        out.append((field.name, values))
    return out


def _timestamp_id() -> int:
    import pyarrow as pa

    return pa.timestamp("us").id
