"""The ``warren`` data source: which reader or writer serves a DataFrame operation.

The package is laid out by direction: ``read/`` (``batch.py`` and ``stream.py`` read stream
queues by offset, ``drain.py`` empties a classic queue with ``mode=drain``), ``write/``
(``writer.py`` publishes rows to an exchange with publisher confirms) and ``jobs/`` (the
``warren pipeline`` commands). Every option is parsed in ``options.py``.
"""

from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource

from warren.spark.options import bool_option, option_map
from warren.spark.schema import read_schema_ddl

__all__ = ["WarrenDataSource"]


def _pushdown_enabled() -> bool:
    """Whether Spark will accept ``pushFilters`` from the reader being created.

    With ``spark.sql.python.filterPushdown.enabled`` off (Spark's default), Spark refuses to plan
    a read whose reader implements ``pushFilters`` (DATA_SOURCE_PUSHDOWN_DISABLED) instead of
    ignoring it, and the data source is not told the setting. The planner that makes that
    check (pyspark/sql/worker/plan_data_source_read.py) holds it in its local
    ``enable_pushdown`` while it asks for the reader, so look there; the other planner
    (data_source_pushdown_filters.py) runs only when pushdown is on and has no such local.
    """
    frame = sys._getframe(1)
    for _ in range(8):
        frame = frame.f_back
        if frame is None:
            break
        flag = frame.f_locals.get("enable_pushdown")
        if isinstance(flag, bool):
            return flag
    return True


class WarrenDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "warren"

    def schema(self) -> str:
        o = option_map(self.options)
        return read_schema_ddl(bool_option(o, "includeHeaders", False), bool_option(o, "includeProperties", False),
                               bool_option(o, "includePropertyList", False))

    def reader(self, schema):
        if str(self.options.get("mode", "")).lower() == "drain":
            from warren.spark.read.drain import DrainReader
            return DrainReader(schema, self.options)
        from warren.spark.read.batch import PushdownBatchReader, StreamBatchReader
        # opt-in: Spark 4.x keeps the read it planned with pushed filters on the relation and
        # reuses it, unfiltered, for later queries of the same DataFrame (read/batch.py)
        if bool_option(option_map(self.options), "pushFilters", False) and _pushdown_enabled():
            return PushdownBatchReader(schema, self.options)
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
