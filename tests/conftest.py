"""Shared fixtures: Warren brokers started as real processes on ephemeral ports.

`broker` is one broker for the whole test session (tests use unique names, so they do not
interfere); `start_broker` starts a private one with extra command-line options (for restart,
heartbeat or shutdown tests) and stops it at the end of the test.

Set WARREN_TEST_BROKER_URL (e.g. amqp://guest:guest@127.0.0.1:5672/) to run the client tests
against another broker, such as RabbitMQ, as a differential check; tests that need a private
broker are then skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

EXTERNAL_URL = os.environ.get("WARREN_TEST_BROKER_URL")

# The child processes (some hundred brokers, CLI commands, crash-test children, Spark's Python
# workers) import warren from source. Where PYTHONDONTWRITEBYTECODE is set, each of them compiled
# every module again (about 0.2 s of a broker's 0.7 s start); give them a bytecode cache outside
# the source tree instead, which keeps the point of that setting (nothing written next to the
# sources). Python checks each cached file against its source, so edits are picked up as usual.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), f"warren-tests-pycache-{os.getuid()}")

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0


@dataclass
class BrokerProc:
    host: str
    port: int
    data_dir: Path | None = None
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    args: list[str] = field(default_factory=list)
    http_port: int | None = None  # the HTTP API (None against an external broker)
    tls_port: int | None = None  # AMQP over TLS, when started with --tls-port

    @property
    def http_url(self) -> str:
        """The HTTP API's base URL (http://127.0.0.1:PORT)."""
        return f"http://{self.host}:{self.http_port}"

    @property
    def url(self) -> str:
        """An amqp:// URL for pika, aio-pika and kombu (vhost "/")."""
        return f"amqp://guest:guest@{self.host}:{self.port}/%2F"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float = STOP_TIMEOUT_S) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time. Idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)


def launch_broker(tmp: Path, *extra: str, data_dir: Path | None = None) -> BrokerProc:
    """Start `python -m warren serve` on an ephemeral port and wait until it listens."""
    data_dir = data_dir or tmp / "data"
    ready = tmp / f"ready-{uuid.uuid4().hex}.json"
    log_path = tmp / f"broker-{uuid.uuid4().hex[:8]}.log"
    args = [
        sys.executable, "-m", "warren", "serve",
        "--host", "127.0.0.1", "--port", "0",
        "--data-dir", str(data_dir), "--ready-file", str(ready), "--http-port", "0", *extra,
    ]
    log = open(log_path, "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}:\n{log_path.read_text()}")
        if ready.exists():
            info = json.loads(ready.read_text())
            return BrokerProc("127.0.0.1", info["port"], data_dir, proc, log_path, args,
                              http_port=info.get("http_port"), tls_port=info.get("tls_port"))
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"broker did not start in {START_TIMEOUT_S}s:\n{log_path.read_text()}")


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> BrokerProc:
    if EXTERNAL_URL:
        u = urlparse(EXTERNAL_URL)
        yield BrokerProc(u.hostname or "127.0.0.1", u.port or 5672)
        return
    b = launch_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def start_broker(tmp_path):
    """Factory: start_broker(*cli_args, data_dir=None) -> BrokerProc, stopped after the test."""
    if EXTERNAL_URL:
        pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
    started: list[BrokerProc] = []

    def start(*extra: str, data_dir: Path | None = None) -> BrokerProc:
        b = launch_broker(tmp_path, *extra, data_dir=data_dir)
        started.append(b)
        return b

    yield start
    for b in started:
        b.stop()


@pytest.fixture
def uid() -> str:
    """A short unique suffix for queue and exchange names."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def rabbitmq_node(tmp_path_factory):
    """A private RabbitMQ node (tests/rabbitmq_node.py) with the management, prometheus, shovel
    and federation plugins on ephemeral ports, shared by the session (tests that make users or
    vhosts there give them unique names and delete them); skipped where rabbitmq-server is not
    installed. Tests never use a RabbitMQ they did not start."""
    from tests.rabbitmq_node import rabbitmq_missing, start_rabbitmq_node
    why = rabbitmq_missing()
    if why:
        pytest.skip(why)
    node = start_rabbitmq_node(tmp_path_factory.mktemp("rabbitmq"))
    try:
        yield node
    finally:
        node.stop()
