"""Debian's rabbitmqadmin (the CLI shipped with RabbitMQ 3.10) run unchanged against a Warren broker.

Each test drives the real binary over the broker's HTTP port and checks the outcome through the
API or an AMQP client, so what is tested is what an operator does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.management.api_client import call, q

RABBITMQADMIN = shutil.which("rabbitmqadmin")
pytestmark = [
    pytest.mark.skipif(RABBITMQADMIN is None, reason="rabbitmqadmin is not installed (Debian: rabbitmq-server)"),
    pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker"),
]


@pytest.fixture(scope="module")
def warren(tmp_path_factory):
    from tests.conftest import launch_broker
    b = launch_broker(tmp_path_factory.mktemp("admin"))
    yield b
    b.stop()


def admin(b, *args, user="guest", password="guest", check=True) -> str:
    cmd = [RABBITMQADMIN, "-H", "127.0.0.1", "-P", str(b.http_port), "-u", user, "-p", password, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, f"{args}: {r.stdout}{r.stderr}"
    return r.stdout + r.stderr


def admin_json(b, *args):
    return json.loads(admin(b, "-f", "raw_json", *args))


def test_queues_exchanges_bindings_publish_get(warren, uid):
    vh = f"vh-{uid}"
    admin(warren, "declare", "vhost", f"name={vh}")
    assert vh in [v["name"] for v in admin_json(warren, "list", "vhosts")]
    admin(warren, "--vhost", vh, "declare", "queue", "name=q1", "durable=true", 'arguments={"x-max-length":10}')
    admin(warren, "--vhost", vh, "declare", "exchange", "name=e1", "type=topic")
    admin(warren, "--vhost", vh, "declare", "binding", "source=e1", "destination=q1", "routing_key=a.#")
    bindings = admin_json(warren, "--vhost", vh, "list", "bindings")
    assert {(b["source"], b["destination"], b["routing_key"]) for b in bindings} == {("", "q1", "q1"), ("e1", "q1", "a.#")}
    admin(warren, "--vhost", vh, "publish", "exchange=e1", "routing_key=a.b", "payload=hello")
    queues = admin_json(warren, "--vhost", vh, "list", "queues", "name", "messages", "arguments")
    assert queues == [{"name": "q1", "messages": 1, "arguments": {"x-max-length": 10}}]
    got = admin_json(warren, "--vhost", vh, "get", "queue=q1", "ackmode=ack_requeue_true")
    assert got[0]["payload"] == "hello" and got[0]["routing_key"] == "a.b" and got[0]["exchange"] == "e1"
    got = admin_json(warren, "--vhost", vh, "get", "queue=q1", "ackmode=ack_requeue_false")
    assert got[0]["redelivered"] is True
    assert admin_json(warren, "--vhost", vh, "list", "queues", "name", "messages") == [{"name": "q1", "messages": 0}]
    admin(warren, "--vhost", vh, "delete", "binding", "source=e1", "destination_type=queue", "destination=q1",
          "properties_key=a.%23")
    assert len(admin_json(warren, "--vhost", vh, "list", "bindings")) == 1
    admin(warren, "--vhost", vh, "publish", "exchange=amq.default", "routing_key=q1", "payload=x")
    admin(warren, "--vhost", vh, "purge", "queue", "name=q1")
    assert admin_json(warren, "--vhost", vh, "list", "queues", "name", "messages") == [{"name": "q1", "messages": 0}]
    admin(warren, "--vhost", vh, "delete", "queue", "name=q1")
    admin(warren, "--vhost", vh, "delete", "exchange", "name=e1")
    assert admin_json(warren, "--vhost", vh, "list", "queues") == []
    admin(warren, "delete", "vhost", f"name={vh}")
    assert vh not in [v["name"] for v in admin_json(warren, "list", "vhosts")]


def test_users_permissions_policies(warren, uid):
    user, vh = f"u-{uid}", f"vp-{uid}"
    admin(warren, "declare", "vhost", f"name={vh}")
    admin(warren, "declare", "user", f"name={user}", "password=secret", "tags=monitoring")
    admin(warren, "declare", "permission", f"vhost={vh}", f"user={user}", "configure=^x", "write=.*", "read=.*")
    users = {u["name"]: u for u in admin_json(warren, "list", "users")}
    assert users[user]["tags"] == ["monitoring"]
    assert users[user]["hashing_algorithm"] == "rabbit_password_hashing_sha256"
    perms = [p for p in admin_json(warren, "list", "permissions") if p["user"] == user]
    assert perms == [{"user": user, "vhost": vh, "configure": "^x", "write": ".*", "read": ".*"}]
    # the new user logs in to the API with its password and tag
    assert call(warren.http_url, "GET", "/api/whoami", user=user, password="secret")[1] == {"name": user,
                                                                                            "tags": ["monitoring"]}
    admin(warren, "--vhost", vh, "declare", "queue", "name=q-pol")
    admin(warren, "--vhost", vh, "declare", "policy", "name=cap", "pattern=^q-", 'definition={"max-length":2}',
          "apply-to=queues", "priority=3")
    policies = admin_json(warren, "list", "policies")
    assert {"vhost": vh, "name": "cap", "pattern": "^q-", "apply-to": "queues", "definition": {"max-length": 2},
            "priority": 3} in policies
    # in force at once: the queue says so and keeps only 2 messages
    assert call(warren.http_url, "GET", f"/api/queues/{q(vh)}/q-pol")[1]["policy"] == "cap"
    for i in range(5):
        admin(warren, "--vhost", vh, "publish", "exchange=amq.default", "routing_key=q-pol", f"payload={i}")
    assert call(warren.http_url, "GET", f"/api/queues/{q(vh)}/q-pol")[1]["messages"] == 2
    admin(warren, "--vhost", vh, "delete", "policy", "name=cap")
    assert not [p for p in admin_json(warren, "list", "policies") if p["vhost"] == vh]
    admin(warren, "delete", "permission", f"vhost={vh}", f"user={user}")
    admin(warren, "delete", "user", f"name={user}")
    assert user not in [u["name"] for u in admin_json(warren, "list", "users")]
    admin(warren, "delete", "vhost", f"name={vh}")


def test_export_import_definitions(warren, tmp_path, uid):
    vh = f"vd-{uid}"
    admin(warren, "declare", "vhost", f"name={vh}")
    admin(warren, "--vhost", vh, "declare", "queue", "name=dq", "durable=true", 'arguments={"x-message-ttl":60000}')
    admin(warren, "--vhost", vh, "declare", "exchange", "name=dx", "type=fanout")
    admin(warren, "--vhost", vh, "declare", "binding", "source=dx", "destination=dq")
    path = tmp_path / "defs.json"
    admin(warren, "export", str(path))
    doc = json.loads(path.read_text())
    assert {"name": vh} in doc["vhosts"]
    assert {"name": "dq", "vhost": vh, "durable": True, "auto_delete": False,
            "arguments": {"x-message-ttl": 60000}} in doc["queues"]
    # delete and import back
    admin(warren, "delete", "vhost", f"name={vh}")
    assert call(warren.http_url, "GET", f"/api/vhosts/{q(vh)}")[0] == 404
    admin(warren, "import", str(path))
    assert call(warren.http_url, "GET", f"/api/queues/{q(vh)}/dq")[1]["arguments"] == {"x-message-ttl": 60000}
    bindings = call(warren.http_url, "GET", f"/api/exchanges/{q(vh)}/dx/bindings/source")[1]
    assert [(b["destination"], b["destination_type"]) for b in bindings] == [("dq", "queue")]
    # per-vhost export/import
    vpath = tmp_path / "vdefs.json"
    admin(warren, "--vhost", vh, "export", str(vpath))
    vdoc = json.loads(vpath.read_text())
    assert [x["name"] for x in vdoc["queues"]] == ["dq"] and "users" not in vdoc
    admin(warren, "delete", "vhost", f"name={vh}")


def test_close_connection(warren, uid):
    conn = pika.BlockingConnection(pika.URLParameters(warren.url))
    try:
        conn.channel()
        deadline = time.monotonic() + 10
        names = []
        while not names and time.monotonic() < deadline:
            names = [c["name"] for c in admin_json(warren, "list", "connections")]
        assert len(names) == 1
        admin(warren, "close", "connection", f"name={names[0]}")
        with pytest.raises(pika.exceptions.ConnectionClosed) as info:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                conn.process_data_events(0.2)
        assert "320" in str(info.value) and "Closed via management plugin" in str(info.value)
    finally:
        if conn.is_open:
            conn.close()


def test_show_overview_and_list_nodes(warren):
    overview = admin_json(warren, "show", "overview")[0]
    assert overview["rabbitmq_version"] and "queue_totals" in overview and "object_totals" in overview
    nodes = admin_json(warren, "list", "nodes")
    assert nodes[0]["name"].startswith("rabbit@") and nodes[0]["running"] is True


def test_errors_reach_rabbitmqadmin(warren, uid):
    out = admin(warren, "--vhost", f"missing-{uid}", "list", "queues", check=False)
    assert "Not found" in out
    out = admin(warren, "list", "users", password="wrong", check=False)
    assert "Access refused" in out
