"""Installing and running the Spark side (warren/spark/__init__.py, jobs/session.py): the pandas
pyspark supports, a user's script run with the venv's Python without activating the venv, and
the zip ``--ship-package`` gives executors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
import zipfile

import pytest

from tests.conftest import EXTERNAL_URL
from tests.spark.stream_helpers import declare_stream, publish_raw, wait_committed
from warren.spark.jobs.session import package_zip
from warren.spec.amqp0_9_1 import BasicProperties


def test_the_installed_pandas_is_one_pyspark_supports():
    # pyspark 4.x warns "does not yet fully support pandas >= 3.0.0" on every run; the spark
    # extra pins pandas below 3 so that nobody sees it
    from pyspark.sql.pandas.utils import require_minimum_pandas_version

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        require_minimum_pandas_version()


def test_the_shipped_zip_holds_importable_sources(tmp_path):
    path = package_zip(tmp_path)
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    assert {"warren/spark/datasource.py", "warren/spark/read/records.py", "warren/codec/properties.py"} <= names
    # the package, or the one-module form an editable install puts in site-packages (setup.py)
    assert {"pyspark_warren/__init__.py", "pyspark_warren.py"} & names
    assert not any(n.endswith((".so", ".pyc")) for n in names)
    # a Python that has only the zip for warren imports it from there (pure-Python fallbacks)
    probe = (f"import sys; sys.path.insert(0, {path!r}); import warren.spark.options, warren.codec.properties; "
             "print(warren.spark.options.__file__)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(path)


USER_SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    import warren.spark

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    warren.spark.register(spark)
    df = (spark.read.format("warren").option("url", sys.argv[1]).option("httpUrl", sys.argv[2])
          .option("stream", sys.argv[3]).load())
    print("rows", df.count(), "python", spark.sparkContext._jsc.sc().conf().get("spark.pyspark.python"))
    spark.stop()
""")


@pytest.mark.timeout(400)  # a Spark start of its own: a minute on a loaded 2-core machine
@pytest.mark.skipif(EXTERNAL_URL is not None, reason="needs Warren's HTTP stream API")
def test_a_script_run_with_the_venv_python_without_activating_it_works(broker, tmp_path, uid):
    """Spark starts Python workers with PYSPARK_PYTHON or else the first python3 on the PATH;
    register() points them at the driver's interpreter, so the venv need not be activated."""
    stream = f"install-{uid}"
    declare_stream(broker, stream)
    publish_raw(broker, f"{stream}.k", [b"x%d" % i for i in range(50)], BasicProperties().encode())
    wait_committed(broker, stream, 50)
    script = tmp_path / "job.py"
    script.write_text(USER_SCRIPT)
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": "/usr/bin:/bin"}  # no venv, no PYSPARK_PYTHON
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    r = subprocess.run([sys.executable, str(script), broker.url, broker.http_url, stream], capture_output=True,
                       text=True, timeout=300, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"rows 50 python {sys.executable}" in r.stdout, r.stdout + r.stderr[-3000:]


NO_REGISTER_SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    # no warren.spark.register(spark): pyspark finds pyspark_warren by itself
    read = lambda: (spark.read.format("warren").option("url", sys.argv[1]).option("stream", sys.argv[2]).load())
    print("rows", read().count())
    import warren.spark
    warren.spark.register(spark)  # as warren pipeline's sessions do: nothing to replace, nothing logged
    print("rows again", read().count())
    spark.stop()
""")


@pytest.mark.timeout(400)  # a Spark start of its own
@pytest.mark.skipif(EXTERNAL_URL is not None, reason="needs Warren's HTTP stream API")
def test_format_warren_works_without_register_and_logs_no_warning_of_ours(broker, tmp_path, uid):
    """After the README's install (editable: setup.py adds the one-module pyspark_warren that
    pkgutil.iter_modules() sees), in an activated venv, with the default log level (WARN)."""
    stream = f"noreg-{uid}"
    declare_stream(broker, stream)
    publish_raw(broker, f"{stream}.k", [b"x%d" % i for i in range(30)], BasicProperties().encode())
    wait_committed(broker, stream, 30)
    script = tmp_path / "job.py"
    script.write_text(NO_REGISTER_SCRIPT)
    venv_bin = os.path.dirname(sys.executable)
    env = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": f"{venv_bin}:/usr/bin:/bin",
           "VIRTUAL_ENV": os.path.dirname(venv_bin)}  # an activated venv
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    r = subprocess.run([sys.executable, str(script), broker.url, stream], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path), env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rows 30" in r.stdout and "rows again 30" in r.stdout, r.stdout + r.stderr[-3000:]
    assert "DATA_SOURCE_NOT_FOUND" not in r.stderr
    assert "statically registered" not in r.stderr, r.stderr[-3000:]
    ours = [line for line in r.stderr.splitlines() if "warren" in line.lower() and "WARN" in line]
    assert not ours, ours
