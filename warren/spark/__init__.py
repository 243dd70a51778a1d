"""Warren's PySpark data source: ``spark.read/readStream/write/writeStream.format("warren")``.

``register(spark)`` makes the ``warren`` format known to a SparkSession; where the distribution
is installed, pyspark also finds it by itself through the top-level package ``pyspark_warren``
(an editable install gets a one-module form of it, setup.py; docs/spark.md); ``register``
registers it again from the session, so that its Python is the session's, without Spark's
warning about replacing a static registration. Importing this package does not import pyspark; the data source classes live
in ``datasource.py``, the readers in ``read/``, the writers in ``write/``, the ``warren
pipeline`` jobs in ``jobs/`` and every option in ``options.py``.

Which Python runs the data source: Spark starts its Python workers with ``PYSPARK_PYTHON`` or
the ``spark.pyspark.python`` setting, else with whatever ``python3`` is first on the PATH, not
with the interpreter of the driver. A script run as ``/path/to/venv/bin/python job.py`` without
activating the venv would then have its workers fail with ``No module named 'warren'`` (or
``'pyspark'``). ``register`` therefore points the session's workers at the driver's own
interpreter when neither is set (a classic session only; a Spark Connect server decides for
itself), and the sessions of ``warren pipeline`` set ``spark.pyspark.python`` when they are
built. On a cluster whose machines keep Python elsewhere, set ``PYSPARK_PYTHON`` (or
``spark.pyspark.python``) yourself: what you set is never replaced.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["register", "use_driver_python"]

log = logging.getLogger("warren.spark")

PYTHON_SETTINGS = ("spark.pyspark.python", "spark.pyspark.driver.python")


def use_driver_python(spark) -> bool:
    """Make ``spark``'s Python workers run this interpreter unless a Python was chosen.

    Returns whether it changed anything. Two places decide: the JVM reads
    ``spark.pyspark.python`` from the context's live configuration each time it starts a worker
    (``spark.conf.set`` refuses it: not a SQL setting), and pyspark's ``SparkContext.pythonExec``
    (``PYSPARK_PYTHON`` or else ``python3``, whatever the configuration says) is what a Python
    data source or UDF registered from this process carries to the workers. Both are pointed at
    the configured Python, or at this interpreter when none is configured.
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return False
    try:
        context = spark.sparkContext
        jconf = context._jsc.sc().conf()  # the SparkContext's own SparkConf, not a copy
    except Exception:  # a Spark Connect session (no context here: its server decides), or no JVM
        return False
    changed = False
    for key in PYTHON_SETTINGS:
        if not jconf.contains(key):
            jconf.set(key, sys.executable)
            changed = True
    chosen = jconf.get("spark.pyspark.python")
    if context.pythonExec != chosen:
        context.pythonExec = chosen
        changed = True
    if changed:
        log.info("warren: Spark's Python workers will run %s (set PYSPARK_PYTHON to choose another)", chosen)
    return changed


_DATA_SOURCE_MANAGER = "org.apache.spark.sql.execution.datasources.DataSourceManager"


def _register_quietly(spark, source) -> None:
    """``spark.dataSource.register(source)`` with Spark's DataSourceManager logging at ERROR.

    Registering is needed even where pyspark registered ``warren`` statically (from
    ``pyspark_warren``): a static registration runs the source's planning in ``PYSPARK_PYTHON``
    or else whatever ``python3`` is on the PATH, never the session's ``spark.pyspark.python``,
    so a session whose Python is set (``warren pipeline``'s, or a script run with the venv's
    Python without activating it) needs the source registered from itself. Spark then logs
    "data source warren replaced a statically registered data source", a warning about our own
    source replacing itself with nothing to act on: that logger is quieted for the call (a
    Spark Connect session has no JVM here and just registers).
    """
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        before = jvm.org.apache.logging.log4j.LogManager.getLogger(_DATA_SOURCE_MANAGER).getLevel()
        configurator.setLevel(_DATA_SOURCE_MANAGER, jvm.org.apache.logging.log4j.Level.ERROR)
    except Exception:
        spark.dataSource.register(source)
        return
    try:
        spark.dataSource.register(source)
    finally:
        configurator.setLevel(_DATA_SOURCE_MANAGER, before)


def register(spark) -> None:
    """Register the ``warren`` data source with ``spark`` (idempotent, and without a warning
    where pyspark registered it statically already)."""
    from warren.spark.datasource import WarrenDataSource

    use_driver_python(spark)
    _register_quietly(spark, WarrenDataSource)
