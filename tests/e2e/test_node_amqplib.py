"""Node's amqplib, unmodified, against the broker: its callback and promise APIs.

The scripts in ``tests/e2e/node/`` each drive one API through several steps and print one
JSON object; the tests here run them and check it. amqplib comes from npm, pinned by
``tests/e2e/node/package-lock.json``, installed into ``tests/e2e/node/node_modules`` once per
test session (``npm ci``, skipped when the installed amqplib already matches the lock file).
Without ``node``/``npm``, or when the install fails (no registry), the tests are skipped and
say why.

Issue 12 point 1 is the first step of both scripts: ``sendToQueue`` until it returns false,
then ``connection.close``. amqplib writes the publishes still buffered behind its
connection.close; a broker that closed the socket right after close-ok made them a TCP reset
(EPIPE in Node) and the close callback never fired.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).parent / "node"
INSTALL_TIMEOUT_S = 180
SCRIPT_TIMEOUT_S = 60  # each script bounds itself at 25 s and reports a time-out


def _installed_matches_lock() -> bool:
    try:
        lock = json.loads((NODE_DIR / "package-lock.json").read_text())
        want = lock["packages"]["node_modules/amqplib"]["version"]
        have = json.loads((NODE_DIR / "node_modules" / "amqplib" / "package.json").read_text())["version"]
    except (OSError, KeyError, ValueError):
        return False
    return want == have


@pytest.fixture(scope="session")
def amqplib() -> Path:
    """tests/e2e/node with amqplib installed (npm ci once per session; skip if impossible)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js tests need `node` and `npm` on PATH (apt-get install nodejs npm)")
    # one install at a time: another test session may share this working tree
    with open(NODE_DIR / ".install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_matches_lock():
            try:
                r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                                   capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
                                   stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pytest.skip(f"`npm ci` in {NODE_DIR} did not finish in {INSTALL_TIMEOUT_S}s (npm registry reachable?)")
            if r.returncode != 0 or not _installed_matches_lock():
                pytest.skip(f"`npm ci` in {NODE_DIR} failed (npm registry reachable?): {r.stderr.strip()[-500:]}")
    return NODE_DIR


def run_script(amqplib: Path, name: str, broker, uid: str) -> dict:
    url = f"amqp://guest:guest@{broker.host}:{broker.port}/%2F"
    r = subprocess.run(["node", name, url, uid], cwd=amqplib, capture_output=True, text=True,
                       timeout=SCRIPT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"node {name} exited with {r.returncode}: {r.stderr[-2000:]}"
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    assert lines, f"node {name} printed no result: {r.stdout[-2000:]} {r.stderr[-2000:]}"
    result = json.loads(lines[-1])
    assert not result.get("timed_out"), f"node {name} timed out: {result}"
    assert result["errors"] == [], result["errors"]
    return result


def test_callback_api_close_with_publishes_in_flight_then_publish_consume_ack(amqplib, broker, uid):
    r = run_script(amqplib, "callback_api.js", broker, uid)
    # point 1: the close callback fires, without error, and without waiting for a time-out
    assert r["flood_sent"] > 100
    assert r["flood_close_callback"] is True and r["flood_close_error"] is None
    assert r["flood_close_ms"] < 10_000
    assert r["basic_received"] == [{"body": f"m{i}", "n": i, "type": "text/plain"} for i in range(10)]
    assert r["basic_left"] == 0
    assert r["basic_closed"] is True


def test_promise_api_close_with_publishes_in_flight_confirms_prefetch_and_close(amqplib, broker, uid):
    r = run_script(amqplib, "promise_api.js", broker, uid)
    assert r["flood_sent"] > 100 and r["flood_close_ms"] < 10_000  # point 1: close() resolved
    assert r["consumed"] == [{"body": f"p{i}", "mode": 2 if i % 2 == 0 else 1} for i in range(5)]
    assert r["left"] == 0
    assert r["confirm_acked"] == 50 and r["confirm_queued"] == 50
    # prefetch 2: two deliveries outstanding, a third only after an ack, then the rest
    assert (r["prefetch_first"], r["prefetch_after_one_ack"], r["prefetch_total"]) == (2, 3, 6)
    assert r["connection_close_event"] is True
