"""Debian's nagios-plugins-rabbitmq checks (aliveness, overview, queue, objects, server) against Warren.

The checks are Perl scripts over the management API (LWP answers only the realm "RabbitMQ
Management"; check_rabbitmq_server asks for the node ``rabbit@<host>``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

CHECKS = {name: shutil.which(f"check_rabbitmq_{name}") for name in ("aliveness", "overview", "queue", "objects",
                                                                     "server")}
pytestmark = [
    pytest.mark.skipif(not all(CHECKS.values()),
                       reason="nagios-plugins-rabbitmq is not installed (apt-get install nagios-plugins-rabbitmq)"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker"),
]


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    from tests.conftest import launch_broker
    b = launch_broker(tmp_path_factory.mktemp("nagios"))
    yield b
    b.stop()


def check(b, name: str, *args) -> tuple[int, str]:
    cmd = [CHECKS[name], "-H", "127.0.0.1", "--port", str(b.http_port), "-u", "guest", "-p", "guest", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def test_aliveness(warren):
    code, out = check(warren, "aliveness")
    assert code == 0 and "RABBITMQ_ALIVENESS OK" in out, out
    code, out = check(warren, "aliveness", "--vhost", "no-such-vhost")
    assert code != 0


def test_overview_counts_messages(warren, uid):
    name = f"nag-{uid}"
    assert call(warren.http_url, "PUT", f"/api/queues/%2F/{q(name)}", {"durable": False})[0] == 201
    for _ in range(3):
        call(warren.http_url, "POST", "/api/exchanges/%2F/amq.default/publish",
             {"routing_key": name, "payload": "x", "payload_encoding": "string", "properties": {}})
    code, out = check(warren, "overview")
    assert code == 0 and "messages_ready OK (3)" in out, out
    code, out = check(warren, "overview", "-c", "2,2,2", "-w", "1,1,1")
    assert code == 2 and "CRITICAL" in out, out
    code, out = check(warren, "queue", "--queue", name)
    assert code == 0 and "messages OK (3)" in out, out
    code, out = check(warren, "queue", "--queue", name, "-w", "2,2,2,2", "-c", "5,5,5,5")
    assert code == 1 and "WARNING" in out, out
    call(warren.http_url, "DELETE", f"/api/queues/%2F/{q(name)}")


def test_objects(warren):
    code, out = check(warren, "objects")
    assert code == 0 and "Gathered Object Counts" in out and "exchange=" in out, out


def test_server(warren):
    code, out = check(warren, "server", "--node", socket.gethostname().split(".")[0])
    assert code == 0 and "RABBITMQ_SERVER OK" in out, out
