"""Node's rhea, unmodified, against the broker over AMQP 1.0 (``node/rhea_patterns.js``): sends
with outcomes, explicit accept and release, a data section read by pika. rhea comes from npm,
pinned by ``node/package-lock.json`` and installed once per session (``npm ci``); without node,
npm or the registry the test skips and says why."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pika
import pytest

NODE_DIR = Path(__file__).parent / "node"
INSTALL_TIMEOUT_S = 180
SCRIPT_TIMEOUT_S = 60  # the script bounds itself at 25 s and reports a time-out


def _installed_matches_lock() -> bool:
    try:
        lock = json.loads((NODE_DIR / "package-lock.json").read_text())
        want = lock["packages"]["node_modules/rhea"]["version"]
        have = json.loads((NODE_DIR / "node_modules" / "rhea" / "package.json").read_text())["version"]
    except (OSError, KeyError, ValueError):
        return False
    return want == have


@pytest.fixture(scope="session")
def rhea() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the rhea test needs `node` and `npm` on PATH")
    with open(NODE_DIR / ".install-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed_matches_lock():
            try:
                r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR,
                                   capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pytest.skip(f"`npm ci` in {NODE_DIR} did not finish in {INSTALL_TIMEOUT_S}s (npm registry reachable?)")
            if r.returncode != 0 or not _installed_matches_lock():
                pytest.skip(f"`npm ci` in {NODE_DIR} failed (npm registry reachable?): {r.stderr.strip()[-500:]}")
    return NODE_DIR


def test_rhea_sends_receives_accepts_releases_and_reaches_pika(rhea, broker, qname):
    p = pika.BlockingConnection(pika.URLParameters(broker.url))
    ch = p.channel()
    ch.queue_declare(qname)
    ch.queue_declare(f"{qname}-pika")
    try:
        r = subprocess.run(["node", "rhea_patterns.js", broker.host, str(broker.port), qname, f"{qname}-pika"],
                           cwd=rhea, capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["error"] is None, (out, r.stderr)
        assert out["accepted"] == 3 and out["released"] == 1 and out["toPika"] == "accepted"
        assert sorted(out["received"]) == ["m0", "m1", "m2"]
        assert out["redelivered"][out["received"].index("m2")] is True  # released, then delivered again
        assert {x["id"]: (x["subject"], x["i"], x["durable"]) for x in out["properties"]} == {
            "id-0": ("s", 0, True), "id-1": ("s", 1, True), "id-2": ("s", 2, True)}
        method, props, body = ch.basic_get(f"{qname}-pika", auto_ack=True)
        assert body == b"rhea data" and props.content_type == "text/plain"
        assert ch.queue_declare(qname, passive=True).method.message_count == 0
    finally:
        ch.queue_delete(qname)
        ch.queue_delete(f"{qname}-pika")
        p.close()
