"""Connections, channels and closing them through the management API, with pika on the AMQP side;
and ``warren serve --definitions FILE`` loading a RabbitMQ definitions file at start-up."""

from __future__ import annotations

import json
import time

import amqp
import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")


def wait_for(fn, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_list_and_close_with_reason(start_broker):
    b = start_broker()
    conn = pika.BlockingConnection(pika.URLParameters(b.url))
    try:
        conn.channel()
        conn.channel()
        conns = wait_for(lambda: call(b.http_url, "GET", "/api/connections")[1])
        c = conns[0]
        assert c["user"] == "guest" and c["vhost"] == "/" and c["channels"] == 2 and c["protocol"] == "AMQP 0-9-1"
        assert c["name"] == f"{c['peer_host']}:{c['peer_port']} -> {c['host']}:{c['port']}"
        assert c["client_properties"]["product"] == "Pika Python Client Library" and c["recv_oct"] > 0
        chans = call(b.http_url, "GET", f"/api/connections/{q(c['name'])}/channels")[1]
        assert [ch["name"] for ch in chans] == [f"{c['name']} (1)", f"{c['name']} (2)"]
        assert call(b.http_url, "GET", f"/api/channels/{q(chans[0]['name'])}")[1]["number"] == 1
        status, _, _ = call(b.http_url, "DELETE", f"/api/connections/{q(c['name'])}",
                            headers={"X-Reason": "maintenance window"})
        assert status == 204
        with pytest.raises(pika.exceptions.ConnectionClosed) as info:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                conn.process_data_events(0.1)
        assert info.value.reply_code == 320
        assert info.value.reply_text == "CONNECTION_FORCED - maintenance window"
        wait_for(lambda: call(b.http_url, "GET", "/api/connections")[1] == [])
        assert call(b.http_url, "DELETE", f"/api/connections/{q(c['name'])}")[0] == 404
    finally:
        if conn.is_open:
            conn.close()


def test_auth_mechanism_is_the_one_the_client_logged_in_with(start_broker):
    """/api/connections shows each connection's SASL mechanism: pika logs in with PLAIN, py-amqp
    here with AMQPLAIN (RabbitMQ's ``auth_mechanism``)."""
    b = start_broker()
    plain = pika.BlockingConnection(pika.URLParameters(b.url))
    amqplain = amqp.Connection(f"{b.host}:{b.port}", login_method="AMQPLAIN")
    try:
        amqplain.connect()
        conns = wait_for(lambda: (lambda cs: cs if len(cs) == 2 else None)(call(b.http_url, "GET", "/api/connections")[1]))
        by_client = {c["client_properties"]["product"]: c["auth_mechanism"] for c in conns}
        assert by_client == {"Pika Python Client Library": "PLAIN", "py-amqp": "AMQPLAIN"}
    finally:
        plain.close()
        amqplain.close()


def test_definitions_at_startup(start_broker, tmp_path, uid):
    defs = {
        "rabbit_version": "3.10.8",
        "users": [{"name": f"boot-{uid}", "password_hash": "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR",
                   "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["administrator"]}],
        "vhosts": [{"name": "boot"}],
        "permissions": [{"user": f"boot-{uid}", "vhost": "boot", "configure": ".*", "write": ".*", "read": ".*"}],
        "policies": [{"vhost": "boot", "name": "cap", "pattern": "^b", "apply-to": "queues",
                      "definition": {"max-length": 1}, "priority": 0}],
        "queues": [{"name": "bq", "vhost": "boot", "durable": True, "auto_delete": False, "arguments": {}}],
        "exchanges": [{"name": "bx", "vhost": "boot", "type": "fanout", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {}}],
        "bindings": [{"source": "bx", "vhost": "boot", "destination": "bq", "destination_type": "queue",
                      "routing_key": "", "arguments": {}}],
    }
    path = tmp_path / "defs.json"
    path.write_text(json.dumps(defs))
    b = start_broker("--definitions", str(path))
    api = b.http_url_for("boot")  # with --workers, the API of the worker that owns the vhost
    assert call(api, "GET", "/api/queues/boot/bq")[1]["policy"] == "cap"
    assert call(api, "GET", "/api/exchanges/boot/bx/bindings/source")[1][0]["destination"] == "bq"
    assert call(b.http_url, "GET", f"/api/users/boot-{uid}")[1]["tags"] == ["administrator"]
    assert "definitions loaded from" in b.log()
    # a file that cannot be imported stops the start with the reason
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"queues": [{"name": "x", "vhost": "nowhere"}]}))
    with pytest.raises(RuntimeError) as info:
        start_broker("--definitions", str(bad), data_dir=tmp_path / "other")
    assert "vhost 'nowhere' does not exist" in str(info.value)
