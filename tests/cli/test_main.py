"""The `warren` group (warren/cli/__init__.py): lazy commands and pyspark as an optional extra."""

from __future__ import annotations

import subprocess
from pathlib import Path
import sys

# runs `warren ARGS...` in a child where pyspark cannot be imported, as if it were not installed
WITHOUT_PYSPARK = ("import sys, runpy; sys.modules['pyspark'] = None; sys.modules['pyarrow'] = None; "
                   "sys.argv[0] = 'warren'; runpy.run_module('warren', run_name='__main__')")

HEAVY = ("pyspark", "pyarrow", "py4j", "pandas")


def run(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "warren", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_broker_path_imports_no_spark():
    probe = ("import sys, warren.cli, warren.cli.serve, warren.server.server, warren.server.workers, "
             "warren.management; print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))")
    r = run(*HEAVY, code=probe)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_help_lists_pipeline_without_importing_it():
    probe = ("import sys; from click.testing import CliRunner; from warren.cli import main; "
             "r = CliRunner().invoke(main, ['--help']); print(r.output); "
             "print('loaded', 'warren.spark.jobs.pipeline' in sys.modules, 'pyspark' in sys.modules)")
    r = run(code=probe)
    assert r.returncode == 0, r.stderr
    assert "pipeline" in r.stdout and "serve" in r.stdout and "policy" in r.stdout
    assert "loaded False False" in r.stdout


def test_pipeline_without_pyspark_says_how_to_install_it():
    for args in (("pipeline",), ("pipeline", "archive", "--stream", "s", "--to", "/nonexistent"),
                 ("pipeline", "replay", "--help")):
        r = run(*args, code=WITHOUT_PYSPARK)
        assert r.returncode == 1, (args, r)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr  # one line, no traceback
        assert "pyspark" in lines[0] and "pip install 'warren-broker[spark]'" in lines[0]


def test_serve_help_works_without_pyspark():
    r = run("serve", "--help", code=WITHOUT_PYSPARK)
    assert r.returncode == 0, r.stderr
    assert "--data-dir" in r.stdout


def test_the_broker_serves_without_pyspark(tmp_path):
    import json
    import signal
    import time

    import pika

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-c", WITHOUT_PYSPARK, "serve", "--port", "0", "--http-port", "0",
                             "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.02)
        port = json.loads(ready.read_text())["port"]
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, b"no spark needed")
        assert ch.basic_get(q, auto_ack=True)[2] == b"no spark needed"
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


def test_version_names_the_distribution_and_where_it_is_installed():
    import warren

    r = run("--version")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()[:2]
    # PyPI's `warren` is another project: the line says which distribution this is
    assert first == f"warren {warren.__version__} (distribution warren-broker, the Warren message broker)"
    assert second.startswith("Python ") and f"package at {Path(warren.__file__).parent}" in second
    assert "warning" not in r.stderr  # no other distribution claims the `warren` package here


def test_another_distribution_named_warren_is_reported(tmp_path):
    # a dist-info of PyPI's `warren` claiming the top-level package, on the path of a child
    other = tmp_path / "warren-0.6.3.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: warren\nVersion: 0.6.3\n")
    (other / "top_level.txt").write_text("warren\n")
    code = f"import sys; sys.path.append({str(tmp_path)!r}); sys.argv[0] = 'warren'; " \
           "import runpy; runpy.run_module('warren', run_name='__main__')"
    r = run("--version", code=code)
    assert r.returncode == 0, r.stderr
    assert "warning: the distribution 'warren' also installs a package named `warren`" in r.stderr
    assert "pip uninstall warren warren-broker, then install warren-broker again" in r.stderr
