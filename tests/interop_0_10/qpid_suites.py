"""Run Qpid's own Python test suites against a Warren and count what passes.

Two suites of the PyPI qpid-python 1.36 release (Python 2.7, found or installed by
``tests/qpid_python.py``), run with its ``qpid-python-test`` runner:

* ``qpid_tests.broker_0_10``: Qpid's AMQP 0-10 broker conformance suite (233 tests), through
  Qpid's low-level 0-10 client;
* ``qpid.tests.messaging``: the client-side suite of ``qpid.messaging`` (its broker-facing part,
  ``endpoints``, is 109 tests; the module also holds address-parser and message tests that need
  no broker).

``run(qp, modules)`` lists the tests, then runs them one module file at a time, each against a
fresh Warren on an ephemeral port (a failing test leaves no queue behind for the next module),
under a time limit: a test that hangs is counted failed ("hung") and the rest of its module runs
in a new process. The result maps every test name to ``(status, reason, seconds)``.

``JAVA_EXCLUDES``: the ignore list that Qpid's Java broker (Qpid Broker-J) applies to these
suites in its CI (``test-profiles/python_tests/Java010PythonExcludes``, the names only; the
reasons are Broker-J's). ``summarize`` counts passed/failed/skipped per suite, per class, and
for the tests left once that list is applied (141 of broker_0_10: 22 of them dtx, 22 use
last-value, priority or message-group queues; 41 further tests need Qpid's QMF management
protocol and are excluded by that list).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXCLUDES_FILE = HERE / "java_0_10_excludes.txt"
RECORD_FILE = HERE / "conformance.json"  # the counts when last recorded (bench/qpid_conformance.py --write)

SUITES = {"broker_0_10": "qpid_tests.broker_0_10", "messaging": "qpid.tests.messaging"}
PASS, FAIL, SKIP = "pass", "fail", "skip"
QMF_MODULES = ("management", "stats", "qmf_events", "threshold")  # broker_0_10 modules that need QMF

_STATUS = re.compile(r"^(\S+?) \.+ (pass|fail|skip)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def java_excludes() -> list[str]:
    return [line.strip() for line in EXCLUDES_FILE.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def excluded(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _env(qp) -> dict:
    env = qp.env
    env["PYTHONUNBUFFERED"] = "1"
    return env


def list_tests(qp, module: str, patterns=()) -> list[str]:
    """The test names of ``module`` (a suite's package) matching ``patterns`` (all if none)."""
    out = subprocess.run([qp.python, qp.test_runner, "-m", module, "-l", *(patterns or [module + ".*"])],
                         env=_env(qp), capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"qpid-python-test -l failed: {out.stderr[-2000:]}")
    return [line.strip() for line in out.stdout.splitlines() if line.startswith(module + ".")]


def parse_output(text: str) -> dict[str, tuple[str, str]]:
    """{test: (status, reason)} from qpid-python-test's output (reason: the error's last line)."""
    lines, joined = _ANSI.sub("", text).splitlines(), []
    for line in lines:  # the runner wraps long names: "a.b. \\" then "    c ..... pass"
        if joined and joined[-1].endswith(". \\"):
            joined[-1] = joined[-1][:-2] + line.strip()
        else:
            joined.append(line)
    results: dict[str, tuple[str, str]] = {}
    current, detail = None, []

    def close() -> None:
        if current is not None and results[current][0] != PASS:
            reason = next((d.strip() for d in reversed(detail) if d.strip()), "")
            results[current] = (results[current][0], reason[:300])

    for line in joined:
        m = _STATUS.match(line.strip()) if not line.startswith(" ") else None
        if m:
            close()
            current, detail = m.group(1), []
            results[current] = (m.group(2), "")
        elif line.startswith("Totals:"):
            break
        elif current is not None:
            detail.append(line)
    close()
    return results


def _run_some(qp, port: int, module: str, names: list[str], timeout: float, log) -> dict:
    """Run these tests in one qpid-python-test process; what it reported before ``timeout``."""
    args = [qp.python, qp.test_runner, "-m", module, "-b", f"guest/guest@127.0.0.1:{port}", *names]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(args, env=_env(qp), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            hung = True
        out.seek(0)
        text = out.read()
    if log is not None:
        log.write(text)
    got = parse_output(text)
    if hung:  # the first test without a status is the one that hung
        for name in names:
            if name not in got:
                got[name] = (FAIL, f"hung (no answer within the {timeout:.0f} s limit of its run)")
                break
    return got


def run(qp, modules: list[str], patterns=(), start_broker=None, per_test_s: float = 20.0, log=None,
        progress=None) -> dict[str, tuple[str, str, float]]:
    """Run the tests of ``modules`` (suite packages), one module file at a time against a fresh
    broker from ``start_broker()`` (-> (port, stop)); {test: (status, reason, seconds)}."""
    results: dict[str, tuple[str, str, float]] = {}
    for module in modules:
        names = list_tests(qp, module, patterns)
        by_file: dict[str, list[str]] = defaultdict(list)
        for n in names:
            by_file[".".join(n.split(".")[:len(module.split(".")) + 1])].append(n)
        for file_module, tests in by_file.items():
            port, stop = start_broker()
            try:
                todo = list(tests)
                while todo:
                    t0 = time.monotonic()
                    got = _run_some(qp, port, module, todo, timeout=30 + per_test_s * len(todo), log=log)
                    spent = time.monotonic() - t0
                    each = spent / max(1, len(got))
                    for name, (status, reason) in got.items():
                        results[name] = (status, reason, round(each, 2))
                    left = [n for n in todo if n not in got]
                    if len(left) == len(todo):  # nothing reported at all: the run itself failed
                        for n in left:
                            results[n] = (FAIL, "not run: qpid-python-test reported nothing", 0.0)
                        break
                    todo = left
            finally:
                stop()
            if progress is not None:
                progress(file_module, {n: results.get(n) for n in tests})
    return results


def summarize(results: dict) -> dict:
    """Counts per suite, per class, for the Java-excludes subset and the QMF tests; failures by class."""
    patterns = java_excludes()
    summary: dict = {}
    for suite, module in SUITES.items():
        names = sorted(n for n in results if n.startswith(module + "."))
        if not names:
            continue

        def count(subset) -> dict:
            c = {PASS: 0, FAIL: 0, SKIP: 0}
            for n in subset:
                c[results[n][0]] += 1
            return {"total": len(subset), "passed": c[PASS], "failed": c[FAIL], "skipped": c[SKIP]}

        per_class = defaultdict(list)
        for n in names:
            per_class[n.rsplit(".", 1)[0]].append(n)
        entry = {
            "all": count(names),
            "java_excludes_applied": count([n for n in names if not excluded(n, patterns)]),
            "classes": {cls: count(ns) for cls, ns in sorted(per_class.items())},
            "failures": {cls: {n.rsplit(".", 1)[1]: results[n][1] for n in ns if results[n][0] == FAIL}
                         for cls, ns in sorted(per_class.items()) if any(results[n][0] == FAIL for n in ns)},
        }
        if suite == "broker_0_10":
            qmf = [n for n in names if n.split(".")[2] in QMF_MODULES]
            entry["qmf"] = count(qmf)
            entry["dtx"] = count([n for n in names if ".dtx." in n and not excluded(n, patterns)])
        summary[suite] = entry
    return summary


def warren_broker(tmp: Path, *extra: str):
    """A start_broker for ``run``: a fresh Warren from this checkout, (port, stop). Under
    WARREN_TEST_BROKER_WORKERS (tests/conftest.py) with that many workers, in its worker mode."""
    counter = [0]
    workers = int(os.environ.get("WARREN_TEST_BROKER_WORKERS") or 1)
    if workers > 1 and "--workers" not in extra:
        extra = (*extra, "--workers", str(workers), "--worker-mode", os.environ.get("WARREN_TEST_WORKER_MODE") or "vhosts")

    def start():
        counter[0] += 1
        folder = tmp / f"broker-{counter[0]}"
        folder.mkdir(parents=True, exist_ok=True)
        ready = folder / "ready.json"
        proc = subprocess.Popen([sys.executable, "-m", "warren", "serve", "--host", "127.0.0.1", "--port", "0",
                                 "--http-port", "-1", "--data-dir", str(folder / "data"), "--ready-file", str(ready),
                                 "--log-level", "warning", *extra],
                                cwd=ROOT, stdout=open(folder / "broker.log", "wb"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        # as tests/conftest.py waits: at load 15-30 on CI's 2-core machine a start took over 30 s
        deadline = time.monotonic() + (60 if workers == 1 else 90)
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.terminate()  # a --workers supervisor stops its workers on SIGTERM; kill leaves them
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                raise RuntimeError(f"broker did not start: {(folder / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.05)
        port = json.loads(ready.read_text())["port"]

        def stop() -> None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

        return port, stop

    return start
