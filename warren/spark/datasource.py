"""The ``warren`` data source: which reader or writer serves a DataFrame operation.

Readers (``reader.py``, ``stream_reader.py``) read stream queues by offset; ``mode=drain``
(``drain.py``) empties a classic queue. Writers (``writer.py``) publish rows to an exchange
with publisher confirms. Options arrive from Spark with lower-cased keys (``options.py``).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from warren.spark.schema import SCHEMA_DDL

__all__ = ["WarrenDataSource"]


class WarrenDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "warren"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema):
        if str(self.options.get("mode", "")).lower() == "drain":
            from warren.spark.drain import DrainReader
            return DrainReader(schema, self.options)
        from warren.spark.reader import StreamBatchReader
        return StreamBatchReader(schema, self.options)

    def streamReader(self, schema):
        from warren.spark.stream_reader import WarrenStreamReader
        return WarrenStreamReader(schema, self.options)

    def writer(self, schema, overwrite: bool):
        from warren.spark.writer import WarrenBatchWriter
        return WarrenBatchWriter(schema, self.options)

    def streamWriter(self, schema, overwrite: bool):
        from warren.spark.writer import WarrenStreamWriter
        return WarrenStreamWriter(schema, self.options)
