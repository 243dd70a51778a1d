"""Clustered Warren nodes for the tests of tests/cluster: start them (tests/conftest.py's
``launch_broker``), start ones that must be refused, read the member list from etcd, ask a
node's HTTP API."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pika

from tests.cluster.etcd_harness import EtcdCluster
from tests.conftest import BrokerProc, launch_broker

GUEST = "Basic " + base64.b64encode(b"guest:guest").decode()
REFUSAL_TIMEOUT_S = 60.0  # a refused start exits within this (it waits on etcd for at most 5 s per member)


class Nodes:
    """Starts clustered nodes (stopped after the test, whatever became of it) and refused ones."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[BrokerProc] = []

    def args(self, etcd: str, cluster: str, name: str, *extra: str) -> list[str]:
        return ["--workers", "1", "--cluster-etcd", etcd, "--cluster-name", cluster, "--node-name", name, *extra]

    def start(self, etcd: str, cluster: str, name: str, *extra: str, data_dir: Path | None = None) -> BrokerProc:
        node = launch_broker(self.tmp, *self.args(etcd, cluster, name, *extra),
                             data_dir=data_dir or self.tmp / f"data-{name}")
        self.started.append(node)
        return node

    def refused(self, etcd: str, cluster: str, name: str, *extra: str, data_dir: Path | None = None) -> str:
        """Start a node that must be refused: its exit status is 1 and stderr ends with one
        ``Error: ...`` line, returned."""
        data_dir = data_dir or self.tmp / f"data-refused-{uuid.uuid4().hex[:6]}"
        proc = subprocess.run([sys.executable, "-m", "warren", "serve", "--host", "127.0.0.1", "--port", "0",
                               "--http-port", "0", "--data-dir", str(data_dir), *self.args(etcd, cluster, name, *extra)],
                              capture_output=True, text=True, timeout=REFUSAL_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert proc.returncode == 1, (proc.returncode, proc.stderr)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        return errors[0]

    def stop_all(self) -> None:
        """Every node started, SIGTERM to all at once, then each waited for (SIGKILL past the bound):
        a node leaving a cluster whose etcd is gone waits a few seconds for it, in parallel."""
        for node in self.started:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.started:
            node.stop()


def members(etcd: EtcdCluster, cluster: str) -> dict[str, dict]:
    prefix = f"/warren/{cluster}/nodes/"
    return {k[len(prefix):]: json.loads(v) for k, v in etcd.get_prefix(prefix).items()}


def wait_until(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.1)


def publish_and_get(node, queue: str, declare: bool = True) -> bytes:
    """Declare a queue on ``node`` (or use it as it is: ``declare`` False), publish to it with
    confirms, get the message back; a queue declared here is deleted after."""
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        if declare:
            ch.queue_declare(queue, durable=True)
        body = f"to {queue}".encode()
        ch.basic_publish("", queue, body, pika.BasicProperties(delivery_mode=2))
        method, _props, got = ch.basic_get(queue, auto_ack=True)
        assert method is not None, "the message published is not in its queue"
        if declare:
            ch.queue_delete(queue)
        return got
    finally:
        conn.close()


def declare(node, queue: str) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        conn.channel().queue_declare(queue, durable=True)
    finally:
        conn.close()


def declare_refused(node, queue: str) -> str:
    """A declare of a new queue on ``node``: the text of the 541 it is refused with (etcd without quorum)."""
    conn = pika.BlockingConnection(pika.URLParameters(node.url))
    try:
        conn.channel().queue_declare(queue, durable=True)
    except pika.exceptions.ConnectionClosedByBroker as e:
        assert e.reply_code == 541, e
        return e.reply_text
    finally:
        if conn.is_open:
            conn.close()
    raise AssertionError(f"the declare of {queue} was not refused")


def api(node, path: str, method: str = "GET", body=None):
    """``/api/<path>`` of ``node`` as guest: its JSON (None when empty); an error status raises
    urllib's HTTPError."""
    return api_status(node, path, method, body, raise_errors=True)[1]


def api_status(node, path: str, method: str = "GET", body=None, raise_errors: bool = False) -> tuple[int, object]:
    """``/api/<path>`` of ``node`` as guest: (HTTP status, JSON or None), an error status included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{node.http_url}/api/{path}", data=data, method=method,
                                     headers={"Authorization": GUEST, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            raw = answer.read()
            return answer.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        if raise_errors:
            raise
        raw = e.read()
        return e.code, (json.loads(raw) if raw else None)
