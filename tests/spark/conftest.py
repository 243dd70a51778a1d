"""One local SparkSession per test process, tuned to start fast and stay small.

The driver JVM gets ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`` (quick JIT, one GC thread), the
UI is off and shuffles use two partitions. Python workers run this interpreter, so they import
the same ``warren`` package as the tests.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (no java on PATH and no JAVA_HOME)")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from warren.spark import register

    local = tmp_path_factory.mktemp("spark-local")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("warren-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
        .config("spark.local.dir", str(local))
        .config("spark.sql.session.timeZone", "UTC")
        # a Python worker must connect back to the JVM within this (15 s by default): on this
        # shared 2-core machine at a load of 25-30 a streaming source's worker took longer
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


CLUSTER_REASON = ("starts a Spark standalone cluster or a Spark Connect server (minutes on a loaded 2-core "
                  "machine): run with `pytest -m spark_cluster tests/spark` or WARREN_SPARK_CLUSTER=1")

FAULTS_REASON = ("kills a Spark job and the broker 100 times (an hour or more on a loaded 2-core machine): run "
                 "with `pytest -m spark_faults tests/spark/test_faults.py` or WARREN_SPARK_FAULTS=1")


def pytest_collection_modifyitems(config, items):
    """Tests marked spark_cluster (spark_faults) run only when asked for: by a -m expression
    naming the marker, or with WARREN_SPARK_CLUSTER=1 (WARREN_SPARK_FAULTS=1); the default run
    stays bounded."""
    for marker, switch, reason in (("spark_cluster", "WARREN_SPARK_CLUSTER", CLUSTER_REASON),
                                   ("spark_faults", "WARREN_SPARK_FAULTS", FAULTS_REASON)):
        if marker in (config.getoption("markexpr") or "") or os.environ.get(switch) == "1":
            continue
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
