"""A real Prometheus (Debian's package) scrapes a test broker every second; its query API answers
with the depth of a queue published to over AMQP, and with Warren's own metrics."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid

import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.helpers import connect
from tests.metrics.scrape import launch_with_metrics

PROMETHEUS = shutil.which("prometheus")
if PROMETHEUS is None:
    pytest.skip("prometheus is not installed (Debian's prometheus package; tools/install-test-deps)",
                allow_module_level=True)
if EXTERNAL_URL:
    pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)", allow_module_level=True)

START_TIMEOUT_S = 30.0
QUERY_TIMEOUT_S = 30.0  # a few scrapes at 1 s, on a loaded machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def prometheus(tmp_path):
    """Start prometheus scraping a fresh broker's two endpoints every second: (broker, query URL)."""
    (tmp_path / "broker").mkdir()
    b, base = launch_with_metrics(tmp_path / "broker")
    target = urllib.parse.urlparse(base).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: warren, static_configs: [{{targets: ['{target}']}}]}}\n"
        f"  - {{job_name: warren-per-object, metrics_path: /metrics/per-object,"
        f" static_configs: [{{targets: ['{target}']}}]}}\n")
    proc = None
    try:
        for _ in range(3):  # the port picked may be taken before prometheus binds it: try again
            port = free_port()
            log = open(tmp_path / "prometheus.log", "wb")
            proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                     f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            api = f"http://127.0.0.1:{port}/api/v1"
            deadline = time.monotonic() + START_TIMEOUT_S
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    get_json(f"{api}/status/buildinfo")
                    break
                except OSError:
                    time.sleep(0.1)
            if proc.poll() is None and time.monotonic() < deadline:
                yield b, api
                return
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        pytest.fail(f"prometheus did not start:\n{(tmp_path / 'prometheus.log').read_text(errors='replace')}")
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()  # only the process this fixture started
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        b.stop()


def query(api: str, promql: str) -> list:
    answer = get_json(f"{api}/query?" + urllib.parse.urlencode({"query": promql}))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def query_until(api: str, promql: str, want) -> list:
    """The query's result once ``want(result)`` holds (Prometheus scrapes every second)."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    result = []
    while time.monotonic() < deadline:
        result = query(api, promql)
        if want(result):
            return result
        time.sleep(0.25)
    pytest.fail(f"{promql}: still {result} after {QUERY_TIMEOUT_S:.0f}s")


def test_prometheus_scrapes_queue_depth_and_warrens_own_metrics(prometheus):
    b, api = prometheus
    name = f"h9-prom-{uuid.uuid4().hex[:8]}"
    conn = connect(b)
    try:
        ch = conn.channel()
        ch.queue_declare(name)
        for i in range(4):
            ch.basic_publish("", name, f"m{i}".encode())
        # both jobs are up, and their scrapes pass Prometheus' own parser
        query_until(api, 'up{job=~"warren|warren-per-object"} == 1', lambda r: len(r) == 2)
        depth = query_until(api, f'rabbitmq_queue_messages_ready{{vhost="/",queue="{name}"}}',
                            lambda r: r and float(r[0]["value"][1]) == 4)
        assert depth[0]["metric"]["job"] == "warren-per-object"
        query_until(api, 'rabbitmq_global_messages_received_total{job="warren",protocol="amqp091"}',
                    lambda r: r and float(r[0]["value"][1]) >= 4)
        query_until(api, 'rabbitmq_queues{job="warren"}', lambda r: r and float(r[0]["value"][1]) >= 1)
        query_until(api, 'warren_event_loop_lag_seconds_count{job="warren"}', lambda r: r and float(r[0]["value"][1]) > 0)
        ch.queue_purge(name)
        query_until(api, f'rabbitmq_queue_messages_ready{{queue="{name}"}}',
                    lambda r: r and float(r[0]["value"][1]) == 0)
        ch.queue_delete(name)
    finally:
        conn.close()
