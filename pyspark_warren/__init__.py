"""Automatic registration of Warren's ``warren`` data source with PySpark.

PySpark (4.0+) looks for top-level modules named ``pyspark_*`` on the Python path the first
time a session resolves a Python data source, imports them, and registers the ``DefaultSource``
class each defines under its ``name()``. Installing Warren (``warren-broker``) installs this
package (an editable install: a one-module copy, ``editable/pyspark_warren.py``), so
``spark.read.format("warren")`` works without ``warren.spark.register(spark)`` (still useful
where the package is not installed in the Python the workers run).
"""

from warren.spark.datasource import WarrenDataSource as DefaultSource

__all__ = ["DefaultSource"]
