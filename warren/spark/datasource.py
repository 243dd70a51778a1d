"""The ``warren`` data source: which reader or writer serves a DataFrame operation.

The package is laid out by direction: ``read/`` (``batch.py`` and ``stream.py`` read stream
queues by offset, ``drain.py`` empties a classic queue with ``mode=drain``), ``write/``
(``writer.py`` publishes rows to an exchange with publisher confirms) and ``jobs/`` (the
``warren pipeline`` commands). Every option is parsed in ``options.py``.
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
            from warren.spark.read.drain import DrainReader
            return DrainReader(schema, self.options)
        from warren.spark.read.batch import StreamBatchReader
        return StreamBatchReader(schema, self.options)

    def streamReader(self, schema):
        from warren.spark.read.stream import WarrenStreamReader
        return WarrenStreamReader(schema, self.options)

    def writer(self, schema, overwrite: bool):
        from warren.spark.write.writer import WarrenBatchWriter
        return WarrenBatchWriter(schema, self.options)

    def streamWriter(self, schema, overwrite: bool):
        from warren.spark.write.writer import WarrenStreamWriter
        return WarrenStreamWriter(schema, self.options)
