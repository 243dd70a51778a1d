"""A toy PySpark data source: the ceiling of Spark's Python data source path on this machine.

``spark.read.format("warren_toy").option("rows", N).option("partitions", P).option("size", S)``
gives N rows with exactly the columns (and Arrow types) of the ``warren`` source's default
schema, in P tasks: one Arrow batch of 100k rows is built with numpy once per Python worker
and yielded again and again (no network, no parsing, no building per row). A job over it measures what Spark itself costs to take Python Arrow
batches and write them (``bench/spark_read_bench.py`` runs it beside the ``warren`` source, in
the same run, for the comparison). Bodies differ per row (the row number in front), as in the
bench's streams, so Parquet's encoders see similar data.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

__all__ = ["ToySource", "BATCH_ROWS"]

BATCH_ROWS = 100_000  # rows per yielded batch, as the warren source's default fetch
_TEMPLATES: dict = {}  # (body size, rows) -> the pre-built batch every read yields


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start, self.end = start, end


def _fixed_binary(values: np.ndarray, width: int, typ) -> pa.Array:
    """A binary/string array of ``len(values)`` values of ``width`` octets each (``values``: an
    (n, width) uint8 array)."""
    n = len(values)
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(values.tobytes())])


def toy_batches(start: int, end: int, size: int, schema: pa.Schema):
    n = end - start
    offsets = np.arange(start, end, dtype=np.int64)
    bodies = np.full((n, size), ord("x"), dtype=np.uint8)
    for k in range(min(8, size)):  # the row number in 8 decimal digits, in front
        bodies[:, 7 - k if size >= 8 else k] = 48 + (offsets // 10 ** k) % 10
    stamps = 1_700_000_000_000_000 + offsets * 10  # microseconds
    columns = {
        "body": _fixed_binary(bodies, size, pa.binary()),
        "routing_key": _fixed_binary(np.full((n, 5), ord("k"), dtype=np.uint8), 5, pa.string()),
        "exchange": _fixed_binary(np.zeros((n, 0), dtype=np.uint8), 0, pa.string()),
        "offset": pa.array(offsets),
        "stream": _fixed_binary(np.full((n, 6), ord("s"), dtype=np.uint8), 6, pa.string()),
        "timestamp": pa.array(stamps, type=pa.timestamp("us", tz="UTC")),
        "message_id": pa.nulls(n, pa.string()),
        "content_type": _fixed_binary(np.tile(np.frombuffer(b"application/octet-stream", np.uint8), (n, 1)), 24,
                                      pa.string()),
    }
    whole = pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
    return [whole.slice(i, BATCH_ROWS) for i in range(0, n, BATCH_ROWS)]


class ToyReader(DataSourceReader):
    def __init__(self, schema, options) -> None:
        self.rows = int(options.get("rows", 1_000_000))
        self.partition_count = int(options.get("partitions", 2))
        self.size = int(options.get("size", 100))

    def partitions(self):
        step = -(-self.rows // self.partition_count)
        return [_Range(a, min(a + step, self.rows)) for a in range(0, self.rows, step)]

    def read(self, partition: _Range):
        from warren.spark.read.records import ARROW_SCHEMA

        key = (self.size, BATCH_ROWS)
        if key not in _TEMPLATES:  # built once per Python worker, then only yielded
            _TEMPLATES[key] = toy_batches(0, BATCH_ROWS, self.size, ARROW_SCHEMA)[0]
        template = _TEMPLATES[key]
        for start in range(partition.start, partition.end, BATCH_ROWS):
            yield template.slice(0, min(BATCH_ROWS, partition.end - start))


class ToySource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "warren_toy"

    def schema(self) -> str:
        from warren.spark.schema import SCHEMA_DDL

        return SCHEMA_DDL

    def reader(self, schema):
        return ToyReader(schema, self.options)
