"""Warren's PySpark data source: ``spark.read/readStream/write/writeStream.format("warren")``.

``register(spark)`` makes the ``warren`` format known to a SparkSession; where the distribution
is installed, pyspark also finds it by itself through the top-level package ``pyspark_warren``
(docs/spark.md). Importing this package does not import pyspark; the data source classes live
in ``datasource.py``.
"""

from __future__ import annotations

__all__ = ["register"]


def register(spark) -> None:
    """Register the ``warren`` data source with ``spark`` (idempotent)."""
    from warren.spark.datasource import WarrenDataSource

    spark.dataSource.register(WarrenDataSource)
