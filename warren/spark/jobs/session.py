"""The SparkSession of Warren's Spark jobs (``warren pipeline ...``), local by default.

Spark needs Java; without it pyspark fails late with a gateway error that says little, so
``require_java`` checks first and says what to install. A local session's JVMs keep the full
JIT: ``-XX:TieredStopAtLevel=1`` (C1 only) starts a second faster but made a 1M-row archive
3-4 times slower (bench/spark_read_bench.py ``--jvm-options``), so only the tests use it;
``-XX:+UseParallelGC`` for throughput.

Python workers run this interpreter (``spark.pyspark.python``, unless ``PYSPARK_PYTHON`` says
otherwise), so they import the same ``warren`` even when the venv is not activated. On a
cluster, executors need ``warren`` importable too: installed in the Python their workers run,
or shipped with the job: ``ship_package=True`` (``--ship-package``) zips the installed
``warren`` and ``pyspark_warren`` packages (``package_zip``) and hands the zip to Spark as
``spark.submit.pyFiles``, which puts it on every Python worker's path.

Spark's log: a session started here logs at ERROR (``quiet_log_config``: no start-up WARN
lines, no INFO), and the failures the commands report themselves in one line (a streaming
query that ends in error, a failed task, an aborted write) are not logged again with their
Java and Python stack traces; ``verbose=True`` (``--verbose``) keeps Spark's own defaults.

Under ``spark-submit`` (or when a session is already active) the master and the JVM are already
chosen: only ``--master`` given explicitly overrides the master, the JVM options are left to
spark-submit's, and the session is not stopped by the job.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "JVM_OPTIONS", "JavaMissingError", "quiet_log_config", "require_java", "build_session", "job_session",
    "package_zip", "parse_confs", "under_spark_submit",
]

JVM_OPTIONS = "-XX:+UseParallelGC"
# the Python data source's filter pushdown (offset and timestamp ranges, read/batch.py) is off
# unless this is set; a reader that implements pushFilters fails to plan without it
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"


# loggers that log, with stack traces, the failures the commands report in one line themselves
REPORTED_BY_US = (
    "org.apache.spark.sql.execution.streaming", "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.sql.execution.datasources.v2",
    "org.apache.spark.sql.execution.python", "org.apache.spark.api.python",
)


def quiet_log_config(folder: str | os.PathLike) -> str:
    """A log4j2 configuration file (in ``folder``) for a quiet session: ERROR and up on stderr,
    without the loggers of ``REPORTED_BY_US``. Returns its path."""
    lines = [
        "rootLogger.level = error", "rootLogger.appenderRef.stderr.ref = console",
        "appender.console.type = Console", "appender.console.name = console", "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n",
    ]
    for i, name in enumerate(REPORTED_BY_US):
        lines += [f"logger.r{i}.name = {name}", f"logger.r{i}.level = off"]
    path = Path(folder) / "log4j2-warren-quiet.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


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


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM and hands it to us


def package_zip(folder: str | os.PathLike) -> str:
    """A zip of the installed ``warren`` and ``pyspark_warren`` packages (Python sources only,
    no compiled extensions: each has a pure-Python fallback), for ``spark.submit.pyFiles``."""
    import pyspark_warren

    import warren

    target = Path(folder) / "warren-package.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in (warren, pyspark_warren):
            source = Path(package.__file__).resolve()
            if source.name != "__init__.py":  # the one-module pyspark_warren of an editable install (setup.py)
                zf.write(source, source.name)
                continue
            root = source.parent
            for path in sorted(root.rglob("*.py")):
                zf.write(path, Path(root.name) / path.relative_to(root))
    return str(target)


def build_session(app_name: str, master: str | None = None, conf: dict | None = None, ship_package: bool = False,
                  verbose: bool = False):
    """The active SparkSession or a new one; ``master`` defaults to local[*] outside spark-submit;
    quiet (see the module docstring) unless ``verbose``."""
    submitted = under_spark_submit()
    if not submitted:
        require_java()
    from pyspark.sql import SparkSession

    from warren.spark import register

    builder = SparkSession.builder.appName(app_name)
    if master is not None or not submitted:
        builder = builder.master(master or "local[*]")
    if not submitted:
        driver_options = JVM_OPTIONS
        if not verbose:
            config = quiet_log_config(tempfile.mkdtemp(prefix="warren-log-"))
            driver_options += f" -Dlog4j2.configurationFile=file:{config}"
        builder = (builder.config("spark.driver.extraJavaOptions", driver_options)
                   .config("spark.executor.extraJavaOptions", JVM_OPTIONS))
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    builder = (builder.config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
               .config("spark.pyspark.python", python).config("spark.pyspark.driver.python", sys.executable)
               .config(PUSHDOWN_SETTING, "true"))
    if ship_package:
        folder = tempfile.mkdtemp(prefix="warren-ship-")
        builder = builder.config("spark.submit.pyFiles", package_zip(folder))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")  # under spark-submit too: its defaults say WARN
    spark.conf.set(PUSHDOWN_SETTING, "true")  # a session that existed already keeps its builder's settings
    register(spark)
    return spark


def parse_confs(ctx, param, values) -> dict:
    """``--conf KEY=VALUE`` options (click callback) as a dict."""
    confs = {}
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            import click

            raise click.BadParameter(f"expected KEY=VALUE, not {item!r}", ctx, param)
        confs[key.strip()] = value
    return confs


@contextmanager
def job_session(app_name: str, master: str | None = None, ship_package: bool = False, conf: dict | None = None,
                verbose: bool = False):
    """``build_session`` for a command: the session is stopped at the end only if the command
    started it (not the active session of a test or of spark-submit's driver)."""
    if not under_spark_submit():
        require_java()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        if ship_package:
            active.sparkContext.addPyFile(package_zip(tempfile.mkdtemp(prefix="warren-ship-")))
        active.conf.set(PUSHDOWN_SETTING, "true")
        from warren.spark import register

        register(active)
        yield active
        return
    spark = build_session(app_name, master, conf, ship_package, verbose)
    try:
        yield spark
    finally:
        spark.stop()

