"""Deliveries (basic.deliver + properties + body) to Arrow RecordBatches of the row schema.

The drain reader yields Arrow batches: Spark takes them without a per-row conversion, but it
checks that their schema equals the one it derives from the data source schema
(``to_arrow_schema``), nullability included, so the batch is built against exactly that schema.
Property lists are decoded with Warren's own decoder, cached by their encoded bytes: a queue's
messages usually repeat a handful of property lists (only ids and timestamps differ when they
differ). ``offset`` and ``stream`` are null: a classic queue has neither.

Header values become strings (the schema's ``headers`` is ``map<string,string>``): text as it
is, byte arrays as UTF-8 (undecodable bytes replaced), booleans ``true``/``false``, numbers and
decimals with ``str``, timestamps in ISO 8601 (UTC), nested tables and arrays as JSON, void as
null.
"""

from __future__ import annotations

import datetime
import decimal
import json

from warren.spark.schema import PROPERTY_FIELDS
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["DeliveryBatchBuilder", "header_text"]

_PROPERTY_NAMES = tuple(name for name, _ in PROPERTY_FIELDS)
_CACHE_LIMIT = 4096
_MAX_TIMESTAMP_S = (1 << 63) // 1_000_000


def header_text(value) -> str | None:
    """One header value as the ``map<string,string>`` holds it (module docstring)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.isoformat()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_jsonable(value), sort_keys=False)
    return str(value)


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    return header_text(value)


class DeliveryBatchBuilder:
    """Collects deliveries and builds one RecordBatch of the reader's Arrow schema."""

    def __init__(self, arrow_schema) -> None:
        self.schema = arrow_schema
        self._decoded: dict[bytes, tuple] = {}  # encoded properties -> (headers entries, properties dict)

    def build(self, deliveries):
        """``deliveries``: Content events of basic.deliver; returns a RecordBatch."""
        import pyarrow as pa

        n = len(deliveries)
        columns = {
            "body": [bytes(d.body) for d in deliveries],
            "routing_key": [d.method.routing_key for d in deliveries],
            "exchange": [d.method.exchange for d in deliveries],
            "offset": [None] * n,
            "stream": [None] * n,
        }
        headers, properties = [], []
        for d in deliveries:
            entries, props = self._properties(bytes(d.properties))
            headers.append(entries)
            properties.append(props)
        columns["headers"] = headers
        columns["properties"] = properties
        arrays = [pa.array(columns[field.name], type=field.type) for field in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _properties(self, encoded: bytes) -> tuple:
        cached = self._decoded.get(encoded)
        if cached is not None:
            return cached
        p, _ = BasicProperties.decode(encoded, 0)
        entries = None if p.headers is None else [(k, header_text(v)) for k, v in p.headers.items()]
        props = {name: getattr(p, name) for name in _PROPERTY_NAMES}
        ts = props["timestamp"]
        if ts is not None:  # AMQP seconds to the Arrow column's microseconds (null past year 294247)
            props["timestamp"] = ts * 1_000_000 if ts < _MAX_TIMESTAMP_S else None
        if len(self._decoded) >= _CACHE_LIMIT:  # ids or timestamps differ per message: do not grow
            self._decoded.clear()
        cached = self._decoded[encoded] = (entries, props)
        return cached
