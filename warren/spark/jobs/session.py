"""A SparkSession for Warren's Spark jobs (``warren pipeline ...``), local by default.

Spark needs Java; without it pyspark fails late with a gateway error that says little, so
``require_java`` checks first and says what to install. A local session's JVM is tuned for
short jobs on small machines (``-XX:TieredStopAtLevel=1``: quick JIT; ``-XX:+UseSerialGC``: one
GC thread). Python workers run this interpreter, so they import the same ``warren``.

Under ``spark-submit`` the master and the JVM are already chosen: only ``--master`` given
explicitly overrides the master, and the JVM options are left to spark-submit's.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["JVM_OPTIONS", "JavaMissingError", "require_java", "build_session"]

JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class JavaMissingError(RuntimeError):
    pass


def require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return
    if shutil.which("java"):
        return
    raise JavaMissingError(
        "Spark needs a Java runtime (17 or newer) and none was found: no 'java' on PATH and no "
        "JAVA_HOME. Install one (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set JAVA_HOME.")


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM and hands it to us


def build_session(app_name: str, master: str | None = None, conf: dict | None = None):
    """The active SparkSession or a new one; ``master`` defaults to local[*] outside spark-submit."""
    submitted = _under_spark_submit()
    if not submitted:
        require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from warren.spark import register

    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(master or "local[*]")
    if not submitted:
        builder = (builder.config("spark.driver.extraJavaOptions", JVM_OPTIONS)
                   .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
    builder = builder.config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
