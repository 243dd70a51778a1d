"""`warren ctl set_parameter`, `list_parameters`, `clear_parameter`, `shovel_status`,
`delete_shovel` against a Warren and the session's private RabbitMQ node (``rabbitmq_node``,
with rabbitmq_shovel_management): the same commands, the same outcome."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from click.testing import CliRunner

from tests.management.api_client import call
from warren.cli import main

@pytest.fixture(params=["warren", "rabbitmq"])
def target(request, broker):
    """(HTTP API base URL, AMQP port) of the session's Warren or RabbitMQ node."""
    if request.param == "rabbitmq":
        node = request.getfixturevalue("rabbitmq_node")
        return node.http_url, node.amqp_port
    if broker.http_port is None:
        pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
    return broker.http_url, broker.port


@pytest.fixture
def vhost(target):
    name = f"ctl-param-{uuid.uuid4().hex[:8]}"
    url = target[0]
    assert call(url, "PUT", f"/api/vhosts/{name}", {})[0] in (201, 204)
    assert call(url, "PUT", f"/api/permissions/{name}/guest", {"configure": ".*", "write": ".*", "read": ".*"})[0] \
        in (201, 204)
    yield name
    call(url, "DELETE", f"/api/vhosts/{name}")


def ctl(url: str, *args: str):
    return CliRunner().invoke(main, ["ctl", "--url", url, *args], catch_exceptions=False,
                              env={"WARREN_CTL_URL": None, "WARREN_CTL_USER": None, "WARREN_CTL_PASS": None})


def test_parameters_and_shovels_through_ctl(target, vhost):
    url, port = target
    value = {"src-uri": f"amqp://guest:guest@127.0.0.1:{port}/{vhost}", "src-queue": "ctl-src",
             "dest-uri": f"amqp://guest:guest@127.0.0.1:{port}/{vhost}", "dest-queue": "ctl-dst"}
    r = ctl(url, "set_parameter", "-p", vhost, "shovel", "s1", json.dumps(value))
    assert r.exit_code == 0, r.output
    r = ctl(url, "list_parameters", "-p", vhost, "--formatter", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(p["component"], p["name"]) for p in rows] == [("shovel", "s1")]
    assert json.loads(rows[0]["value"]) == value
    assert call(url, "GET", "/api/shovels")[0] == 200  # both run the shovel status API
    deadline = time.monotonic() + 30
    mine = []
    while time.monotonic() < deadline:
        r = ctl(url, "shovel_status", "--formatter", "json")
        mine = [s for s in json.loads(r.stdout) if s["vhost"] == vhost]
        if mine and mine[0]["state"] == "running":
            break
        time.sleep(0.2)
    assert mine and mine[0]["name"] == "s1" and mine[0]["state"] == "running", mine
    assert "guest:guest" not in mine[0]["source"]
    # a bad value: the broker's validation fails the command (65), nothing stored
    r = ctl(url, "set_parameter", "-p", vhost, "shovel", "bad", json.dumps({"src-uri": "amqp://"}))
    assert r.exit_code == 65, r.output
    r = ctl(url, "set_parameter", "-p", vhost, "shovel", "bad", "{not json")
    assert r.exit_code == 65
    assert ctl(url, "delete_shovel", "-p", vhost, "s1").exit_code == 0
    assert ctl(url, "clear_parameter", "-p", vhost, "shovel", "s1").exit_code == 69, "already gone"
    r = ctl(url, "list_parameters", "-p", vhost, "--formatter", "json")
    assert json.loads(r.stdout) == []
    assert ctl(url, "list_parameters", "-p", "no-such-vhost-" + vhost).exit_code == 65
