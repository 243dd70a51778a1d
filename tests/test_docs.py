"""The documentation as a newcomer meets it: the site builds with `mkdocs build --strict` (a
broken link, a missing anchor or a page left out of the navigation fails), the README's chart
is what its script draws from the benchmark's output, and the README and docs give only
install commands that work (PyPI's `warren` is another project: docs/install.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
# the README's first two commands: run the broker with the embedded defaults, run the tests
RUN_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/warren serve"
TEST_COMMAND = "tools/test"


def test_the_site_builds_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    assert (tmp_path / "site" / "index.html").exists()
    # the changelog page carries the repository's CHANGELOG.md (a snippet include, checked paths)
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert "Keep a Changelog" in changelog and "warren-broker" in changelog


def test_the_chart_is_what_the_script_draws_from_the_benchmark_output(tmp_path):
    out = tmp_path / "matrix.svg"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "perf_chart.py"), str(ROOT / "bench" / "results" / "matrix.txt"),
                        str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    committed = (DOCS / "images" / "matrix.svg").read_text()
    assert out.read_text() == committed, "docs/images/matrix.svg is stale: run tools/perf_chart.py"
    assert "1p1c-1KiB-persist-confirm" in committed and "RabbitMQ" in committed


def test_the_chart_reads_compare_py_json_lines_as_compare_py_summarises_them(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import perf_chart
    finally:
        sys.path.remove(str(ROOT / "tools"))
    runs = [{"scenario": "1p1c-16B", "broker": "warren", "consumed_per_s": v} for v in (100.0, 300.0, 200.0)]
    runs += [{"scenario": "1p1c-16B", "broker": "rabbit", "consumed_per_s": 50.0},
             {"scenario": "pubonly-1p", "broker": "warren", "published_per_s": 70.0, "consumed_per_s": 0}]
    lines = tmp_path / "runs.jsonl"
    lines.write_text("".join(__import__("json").dumps(r) + "\n" for r in runs))
    rows = {r["scenario"]: r for r in perf_chart.read_input(lines)}
    assert rows["1p1c-16B"]["warren"] == 200.0 and rows["1p1c-16B"]["rabbitmq"] == 50.0  # medians
    assert rows["pubonly-1p"]["warren"] == 70.0 and rows["pubonly-1p"]["rabbitmq"] is None
    assert "4.00×" in perf_chart.draw(list(rows.values()), "test")


def test_the_readme_starts_with_its_two_commands_and_guides():
    text = README.read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    assert blocks[0].strip() == RUN_COMMAND and blocks[1].strip() == TEST_COMMAND
    lines = text.splitlines()
    assert len(lines) <= 140, f"README.md has {len(lines)} lines: it guides, the references are in docs/"
    headings = [line for line in lines if line.startswith("## ")]
    assert len(headings) >= 8, headings
    assert max(len(line) for line in lines if not line.startswith("|")) <= 200


def test_every_dependency_in_pyproject_is_listed_in_the_readme_with_its_reason():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    table = README.read_text().split("## Dependencies", 1)[1]
    rows = {row.split("|")[1]: row.split("|")[2].strip() for row in table.splitlines() if row.startswith("| ")}
    listed = {name: why for cell, why in rows.items() for name in re.findall(r"`([A-Za-z0-9_.-]+)", cell)}
    for requirement in wanted:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)
        if name == project["name"]:
            continue  # the test extra names the spark extra through the distribution itself
        assert name in listed, f"{name} (pyproject.toml) has no row in the README's Dependencies"
        assert len(listed[name]) > 10, f"{name}: its reason is missing"


def test_every_relative_link_of_the_readme_resolves():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text()):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), target


def test_no_install_command_names_pypis_unrelated_warren():
    # `pip install warren` or 'warren[extra]' installs someone else's project (or fails)
    wrong = re.compile(r"pip install +(-\S+ +)*['\"]?warren(\[|['\"]?(\s|$|`))")
    pages = [README, *sorted(DOCS.rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}:{n}: {line.strip()}" for page in pages if "history" not in page.parts
             for n, line in enumerate(page.read_text().splitlines(), 1) if wrong.search(line)]
    assert not found, "\n".join(found)


# --- the README's hello worlds, run as written against a Warren on an ephemeral port ------------

from tests.e2e.test_node_amqplib import amqplib  # noqa: E402,F401  (the fixture: amqplib from npm, or a skip)

HELLO_TIMEOUT_S = 60


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def _on_port(code: str, port: int) -> str:
    return re.sub(r"(?<![0-9])5672(?![0-9])", str(port), code)  # RabbitMQ's default port, in the examples


def test_the_python_hello_world_prints_its_message(start_broker, tmp_path):
    b = start_broker()
    (code,) = [block for block in _blocks("python") if "import pika" in block]
    r = subprocess.run([sys.executable, "-c", _on_port(code, b.port)], capture_output=True, text=True,
                       timeout=HELLO_TIMEOUT_S, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "b'Hello, world!'"


def test_the_node_hello_world_prints_its_message(start_broker, amqplib, tmp_path):  # noqa: F811
    import os

    b = start_broker()
    (code,) = _blocks("js")
    script = tmp_path / "hello.js"
    script.write_text(_on_port(code, b.port))
    r = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=HELLO_TIMEOUT_S, cwd=tmp_path,
                       env=dict(os.environ, NODE_PATH=str(amqplib / "node_modules")), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Hello, world!"


def test_the_celery_hello_world_adds(start_broker, tmp_path):
    import os
    import shlex
    import signal
    import time

    b = start_broker()
    (tasks,) = [block for block in _blocks("python") if "from celery import Celery" in block]
    (tmp_path / "tasks.py").write_text(_on_port(tasks, b.port))
    text = README.read_text()
    bin_dir = str(Path(sys.executable).parent) + "/"
    worker_command = re.search(r"`(\.venv/bin/celery [^`]*)`", text).group(1).replace(".venv/bin/", bin_dir)
    client_command = re.search(r"`(\.venv/bin/python -c [^`]*)`", text).group(1).replace(".venv/bin/", bin_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY", "WARREN_"))}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:  # info: the worker's "ready." line is what this waits for
        worker = subprocess.Popen([*shlex.split(worker_command), "--loglevel", "info", "--concurrency", "1"],
                                  cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        while "ready." not in log.read_text():
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        r = subprocess.run(shlex.split(client_command), capture_output=True, text=True, timeout=HELLO_TIMEOUT_S,
                           cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr + log.read_text()[-3000:]
        assert r.stdout.strip() == "5"
    finally:
        os.killpg(worker.pid, signal.SIGTERM)  # the worker and its pool process, this test's own group
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
