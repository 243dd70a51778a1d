"""--prometheus-port and --prometheus-host: off by default, validated, ready file, --workers,
and the flow-control pauses counted where they happen."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import EXTERNAL_URL, launch_broker
from tests.e2e.helpers import connect
from tests.metrics.scrape import fetch, launch_with_metrics, samples, value

pytest.importorskip("prometheus_client", reason="prometheus-client (the test extra) parses the exposition")
if EXTERNAL_URL:
    pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)", allow_module_level=True)


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warren", "serve", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_off_by_default_and_in_the_ready_file_as_null(tmp_path):
    b = launch_broker(tmp_path)
    try:
        ready = json.loads(Path(b.args[b.args.index("--ready-file") + 1]).read_text())
        assert ready["prometheus_port"] is None
    finally:
        b.stop()


def test_bad_port_is_one_line_and_print_config_shows_the_settings(tmp_path):
    r = serve("--data-dir", str(tmp_path / "d"), "--port", "0", "--http-port", "-1", "--prometheus-port", "70000")
    assert r.returncode != 0
    assert "prometheus port 70000 out of range" in r.stderr and "Traceback" not in r.stderr
    r = serve("--print-config", "--prometheus-port", "15692", "--prometheus-host", "0.0.0.0")
    assert r.returncode == 0, r.stderr
    assert "prometheus_port = 15692" in r.stdout and 'prometheus_host = "0.0.0.0"' in r.stdout


def test_port_in_use_is_a_clean_start_up_failure(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = serve("--data-dir", str(tmp_path / "d"), "--port", "0", "--http-port", "-1",
                  "--prometheus-port", str(port))
    assert r.returncode == 1
    assert f"Prometheus metrics on 127.0.0.1:{port} (--prometheus-port): port already in use" in r.stderr


def test_each_worker_serves_its_own_metrics(tmp_path):
    b = launch_broker(tmp_path, "--workers", "2", "--vhost", "/", "--vhost", "h9-other", "--prometheus-port", "0")
    try:
        ready = json.loads(Path(b.args[b.args.index("--ready-file") + 1]).read_text())
        ports = [w["prometheus_port"] for w in ready["workers"]]
        assert len(set(ports)) == 2 and all(isinstance(p, int) and p > 0 for p in ports)
        assert ready["prometheus_port"] == ports[0]
        for port in ports:
            parsed = samples(fetch(f"http://127.0.0.1:{port}/metrics")[0])
            assert value(parsed, "rabbitmq_queues") >= 0
    finally:
        b.stop()


def test_flow_control_pauses_are_counted(tmp_path):
    b, base = launch_with_metrics(tmp_path, "--queue-flow-high", "5")
    try:
        name = f"h9-flow-{uuid.uuid4().hex[:8]}"
        consumer = connect(b)
        cch = consumer.channel()
        cch.queue_declare(name)
        cch.basic_qos(prefetch_count=1)
        cch.basic_consume(name, lambda *a: None)  # takes one message and never acks: the rest piles up
        publisher = connect(b)
        pch = publisher.channel()
        for _ in range(50):
            pch.basic_publish("", name, b"x" * 100)
        publisher.process_data_events(0)
        deadline = time.monotonic() + 10
        paused = 0
        while time.monotonic() < deadline:
            paused = value(samples(fetch(base + "/metrics")[0]), "warren_flow_control_pauses_total", reason="queue")
            if paused >= 1:
                break
            time.sleep(0.1)
        assert paused >= 1
        cch.queue_delete(name)
        publisher.close()
        consumer.close()
    finally:
        b.stop()
