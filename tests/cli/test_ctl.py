"""`warren ctl` against real brokers over their HTTP API: the same scenarios run against a Warren
this module starts and against the session's private RabbitMQ node (the ``rabbitmq_node``
fixture, tests/rabbitmq_node.py; skipped, with the reason, where rabbitmq-server is not installed). Commands run through click's CliRunner in this process
(the HTTP side is real: urllib to the broker's port); the exit-code, environment and
await_startup tests run `python -m warren ctl` as a subprocess.

Each test works in a vhost of its own (`h8ctl-<uid>`) and with throw-away users, deleted at the
end, so the session's RabbitMQ node keeps nothing. RabbitMQ's management API samples queue and
connection statistics every 5 s, so checks of counts poll with a deadline.
"""

from __future__ import annotations

import base64
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from urllib.parse import quote

import pika
import pytest
from click.testing import CliRunner

from tests.conftest import launch_broker, vhost_beside
from warren.cli import main

pytestmark = pytest.mark.timeout(90)

STATS_DEADLINE_S = 15.0  # RabbitMQ's statistics interval is 5 s


@dataclass
class Target:
    name: str
    http_url: str
    amqp_port: int

    def amqp(self, vhost: str, user: str = "guest", password: str = "guest") -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.amqp_port, vhost, pika.PlainCredentials(user, password),
            socket_timeout=10, stack_timeout=15, connection_attempts=1))

    def http(self, method: str, path: str, body=None, user: str = "guest", password: str = "guest") -> int:
        """Status of a raw API request (for set-up and clean-up that must not depend on ctl)."""
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request = urllib.request.Request(
            self.http_url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


@pytest.fixture(scope="module", params=["warren", "rabbitmq"])
def target(request, tmp_path_factory):
    if request.param == "rabbitmq":
        node = request.getfixturevalue("rabbitmq_node")
        yield Target("rabbitmq", node.http_url, node.amqp_port)
        return
    if os.environ.get("WARREN_TEST_BROKER_URL"):
        pytest.skip("needs a private Warren broker (WARREN_TEST_BROKER_URL is set)")
    b = launch_broker(tmp_path_factory.mktemp("ctl"))
    try:
        yield Target("warren", b.http_url, b.port)
    finally:
        b.stop()


@dataclass
class Ctl:
    target: Target

    def __call__(self, *args: str, input: str | None = None, env: dict | None = None):
        environment = {"WARREN_CTL_URL": None, "WARREN_CTL_USER": None, "WARREN_CTL_PASS": None, **(env or {})}
        result = CliRunner().invoke(main, ["ctl", "--url", self.target.http_url, *args], input=input,
                                    env=environment, catch_exceptions=False)
        return result

    def ok(self, *args: str, **kw):
        r = self(*args, **kw)
        assert r.exit_code == 0, f"ctl {' '.join(args)} exited {r.exit_code}: {r.stderr}"
        return r

    def json(self, *args: str):
        return json.loads(self.ok(*args, "--formatter", "json").stdout)

    def table(self, *args: str) -> list[list[str]]:
        """The rows of a tab-separated table, header row first."""
        return [line.split("\t") for line in self.ok(*args).stdout.splitlines()]


@pytest.fixture
def ctl(target) -> Ctl:
    return Ctl(target)


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def vhost(target, ctl, uid):
    """A vhost of this test, guest allowed everything in it; deleted afterwards."""
    name = vhost_beside(f"h8ctl-{uid}")  # with --workers, one the API of the worker owning "/" shows
    ctl.ok("add_vhost", name)
    ctl.ok("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    yield name
    target.http("DELETE", f"/api/vhosts/{quote(name, safe='')}")


@pytest.fixture
def users(target):
    """Names of throw-away users, deleted afterwards: users.new() -> a fresh name."""

    class Users(list):
        def new(self) -> str:
            name = f"h8ctl-user-{uuid.uuid4().hex[:8]}"
            self.append(name)
            return name

    made = Users()
    yield made
    for name in made:
        target.http("DELETE", f"/api/users/{quote(name, safe='')}")


def eventually(check, timeout: float = STATS_DEADLINE_S, interval: float = 0.25):
    """Poll `check()` until it returns a true value (returned) or the deadline passes (last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def _free_port() -> int:
    """A free port below the kernel's ephemeral range: no broker another test starts on port 0
    can take it meanwhile (with the workers' HTTP ports, CI's queues-mode run once did)."""
    for _ in range(100):
        port = random.randrange(20100, 25000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20100-24999")


def _run(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_CTL_")}
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "warren", "ctl", *args], capture_output=True, text=True,
                          timeout=timeout, env=environment)


# --------------------------------------------------------------------------- node


def test_ping_status_and_help(ctl):
    r = ctl.ok("ping")
    assert r.stdout.strip() == "Ping succeeded"
    status = ctl.json("status")
    assert status["overview"]["node"]
    assert any(listener.get("protocol") == "amqp" for listener in status["overview"].get("listeners", []))
    r = ctl.ok("status")
    text = r.stdout
    assert "Listeners" in text
    if ctl.target.name == "warren":  # Warren says Warren where a person reads it, and where it was reached
        import warren
        heading = f"Status of Warren node {status['overview']['node']} at {ctl.target.http_url} ..."
        assert text.startswith(heading + "\n") and heading in r.stderr
        assert f"\nWarren version: {warren.__version__}\n" in text
        assert "\nRuntime: Python " in text and "Erlang" not in text
    else:  # RabbitMQ's own wording for RabbitMQ
        assert text.startswith(f"Status of node {status['overview']['node']} ...\n")
        assert "\nRabbitMQ version: 3." in text and "\nErlang version: " in text
    assert ctl("--help").exit_code == 0


# --------------------------------------------------------------------------- vhosts, users, permissions


def test_vhosts_are_added_listed_and_deleted(ctl, uid):
    name = f"h8ctl-vh-{uid}/a b%2F"  # a slash, a space and a percent sign travel percent-encoded once
    assert ctl("add_vhost", name, "--description", "ctl test").exit_code == 0
    try:
        assert ctl("add_vhost", name).exit_code == 0  # already there: fine, as rabbitmqctl
        rows = ctl.table("list_vhosts", "name", "description")
        assert rows[0] == ["name", "description"]
        assert [name, "ctl test"] in rows
        assert {"name": name} in ctl.json("list_vhosts")
    finally:
        r = ctl("delete_vhost", name)
    assert r.exit_code == 0, r.stderr
    assert name not in [row[0] for row in ctl.table("list_vhosts")]
    r = ctl("delete_vhost", name)
    assert r.exit_code == 65 and "does not exist" in r.stderr


def test_users_tags_and_passwords(ctl, users, target):
    name = users.new()
    ctl.ok("add_user", name, "first-secret")
    r = ctl("add_user", name, "other")
    assert r.exit_code == 70 and "already exists" in r.stderr
    assert {"user": name, "tags": []} in ctl.json("list_users")

    ctl.ok("set_user_tags", name, "administrator", "monitoring")
    listed = {u["user"]: u["tags"] for u in ctl.json("list_users")}
    assert sorted(listed[name]) == ["administrator", "monitoring"]
    row = next(row for row in ctl.table("list_users") if row[0] == name)
    assert row[1] in ("[administrator, monitoring]", "[monitoring, administrator]")  # rabbitmqctl's look
    # the tags did not cost the password: the user logs in to the API with it
    assert ctl("ping", "--username", name, "--password", "first-secret").exit_code == 0

    ctl.ok("change_password", name, "second-secret")
    r = ctl("ping", "--username", name, "--password", "first-secret")
    assert r.exit_code == 77, r.stderr
    assert ctl("ping", "--username", name, "--password", "second-secret").exit_code == 0
    # and the password change kept the tags
    assert sorted({u["user"]: u["tags"] for u in ctl.json("list_users")}[name]) == ["administrator", "monitoring"]

    ctl.ok("set_user_tags", name)  # no tags: cleared
    assert {"user": name, "tags": []} in ctl.json("list_users")

    ctl.ok("delete_user", name)
    assert name not in [u["user"] for u in ctl.json("list_users")]
    for args in (("delete_user", name), ("change_password", name, "x"), ("set_user_tags", name, "management")):
        r = ctl(*args)
        assert r.exit_code == 67, (args, r.exit_code, r.stderr)
        assert "does not exist" in r.stderr


def test_permissions_are_set_listed_and_cleared(ctl, vhost, users, target):
    name = users.new()
    ctl.ok("add_user", name, "pw")
    ctl.ok("set_permissions", "-p", vhost, name, "^conf-", "^write-", "^read-")
    rows = ctl.table("list_permissions", "-p", vhost)
    assert rows[0] == ["user", "configure", "write", "read"]
    assert [name, "^conf-", "^write-", "^read-"] in rows
    # the permission works over AMQP: the user may declare conf-* and nothing else
    connection = target.amqp(vhost, name, "pw")
    try:
        channel = connection.channel()
        channel.queue_declare(f"conf-{name}")
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
            channel.queue_declare(f"other-{name}")
        assert refused.value.reply_code == 403
    finally:
        if connection.is_open:
            connection.close()

    ctl.ok("clear_permissions", "-p", vhost, name)
    assert name not in [row[0] for row in ctl.table("list_permissions", "-p", vhost)]

    r = ctl("set_permissions", "-p", vhost, "h8ctl-nobody", ".*", ".*", ".*")
    assert r.exit_code == 67, r.stderr
    r = ctl("set_permissions", "-p", f"{vhost}-missing", name, ".*", ".*", ".*")
    assert r.exit_code == 65, r.stderr
    r = ctl("clear_permissions", "-p", vhost, "h8ctl-nobody")
    assert r.exit_code == 67, r.stderr
    r = ctl("list_permissions", "-p", f"{vhost}-missing")
    assert r.exit_code == 65, r.stderr


def test_vhost_limits_replace_the_previous_ones(ctl, vhost):
    ctl.ok("set_vhost_limits", "-p", vhost, '{"max-queues": 7, "max-connections": 3}')
    assert json.loads(ctl.ok("list_vhost_limits", "-p", vhost).stdout) == {"max-queues": 7, "max-connections": 3}
    ctl.ok("set_vhost_limits", "-p", vhost, '{"max-connections": 4}')
    assert ctl.json("list_vhost_limits", "-p", vhost) == {"max-connections": 4}
    ctl.ok("clear_vhost_limits", "-p", vhost)
    assert ctl.json("list_vhost_limits", "-p", vhost) == {}
    assert ctl("set_vhost_limits", "-p", vhost, "not json").exit_code == 65
    assert ctl("set_vhost_limits", "-p", vhost, '{"max-queues": "many"}').exit_code == 65
    assert ctl("set_vhost_limits", "-p", f"{vhost}-missing", '{"max-queues": 1}').exit_code == 65


# --------------------------------------------------------------------------- queues, exchanges, bindings


def test_list_queues_columns_purge_and_delete(ctl, vhost, target):
    connection = target.amqp(vhost)
    try:
        channel = connection.channel()
        channel.queue_declare("work", durable=True)
        channel.queue_declare("idle", arguments={"x-max-length": 10})
        for i in range(3):
            channel.basic_publish("", "work", b"m%d" % i)
        channel.basic_consume("idle", lambda *a: None)

        def queue_rows():
            rows = ctl.table("list_queues", "-p", vhost, "name", "messages", "consumers", "durable")
            return rows if ["work", "3", "0", "true"] in rows and ["idle", "0", "1", "false"] in rows else None

        rows = eventually(queue_rows)
        assert rows, ctl.ok("list_queues", "-p", vhost, "name", "messages", "consumers", "durable").stdout
        assert rows[0] == ["name", "messages", "consumers", "durable"]
        # default columns, the silent flag and comma-separated columns as rabbitmqctl takes them
        assert ctl.table("list_queues", "-p", vhost)[0] == ["name", "messages"]
        silent = ctl.ok("list_queues", "-p", vhost, "-s", "name,arguments").stdout.splitlines()
        assert "idle\t{\"x-max-length\":10}" in silent and not any(line.startswith("name") for line in silent)
        as_json = ctl.json("list_queues", "-p", vhost, "name", "messages")
        assert {"name": "work", "messages": 3} in as_json

        r = ctl("list_queues", "-p", vhost, "name", "no_such_column")
        assert r.exit_code == 64 and "no_such_column" in r.stderr

        ctl.ok("purge_queue", "-p", vhost, "work")
        assert channel.queue_declare("work", passive=True).method.message_count == 0
        r = ctl("delete_queue", "-p", vhost, "idle", "--if-unused")
        assert r.exit_code == 65 and "in use" in r.stderr  # it has a consumer: the broker says 400
        ctl.ok("delete_queue", "-p", vhost, "work")
        assert eventually(lambda: "work" not in [row[0] for row in ctl.table("list_queues", "-p", vhost)])
    finally:
        if connection.is_open:
            connection.close()
    for args in (("purge_queue", "-p", vhost, "work"), ("delete_queue", "-p", vhost, "work")):
        r = ctl(*args)
        assert r.exit_code == 69 and "not found" in r.stderr, (args, r.exit_code, r.stderr)
    r = ctl("purge_queue", "-p", f"{vhost}-missing", "work")
    assert r.exit_code == 65, r.stderr
    r = ctl("list_queues", "-p", f"{vhost}-missing")
    assert r.exit_code == 65 and "does not exist" in r.stderr


def test_list_exchanges_and_bindings(ctl, vhost, target):
    connection = target.amqp(vhost)
    try:
        channel = connection.channel()
        channel.exchange_declare("events", "topic", durable=True)
        channel.queue_declare("audit")
        channel.queue_bind("audit", "events", "order.#")
    finally:
        connection.close()
    rows = ctl.table("list_exchanges", "-p", vhost)
    assert rows[0] == ["name", "type"]
    assert ["events", "topic"] in rows and ["amq.fanout", "fanout"] in rows
    assert ["events", "topic", "true", "false"] in ctl.table("list_exchanges", "-p", vhost, "name", "type",
                                                             "durable", "internal")
    rows = ctl.table("list_bindings", "-p", vhost)
    assert rows[0] == ["source_name", "source_kind", "destination_name", "destination_kind", "routing_key",
                       "arguments"]
    assert ["events", "exchange", "audit", "queue", "order.#"] in [row[:5] for row in rows]
    assert ["", "exchange", "audit", "queue", "audit"] in [row[:5] for row in rows]  # the default binding
    assert {"source_name": "events", "destination_name": "audit", "routing_key": "order.#"} in ctl.json(
        "list_bindings", "-p", vhost, "source_name", "destination_name", "routing_key")


# --------------------------------------------------------------------------- connections, channels, consumers


def test_connections_channels_consumers_and_close(ctl, vhost, target):
    connection = target.amqp(vhost)
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=7)
        channel.queue_declare("jobs")
        tag = channel.basic_consume("jobs", lambda *a: None)

        def ours():
            return [c for c in ctl.json("list_connections", "name", "user", "vhost", "state", "channels")
                    if c["vhost"] == vhost]

        mine = eventually(ours)
        assert len(mine) == 1 and mine[0]["user"] == "guest", mine
        rows = ctl.table("list_connections")
        assert rows[0] == ["user", "peer_host", "peer_port", "state"]

        channels = eventually(lambda: [c for c in ctl.json("list_channels", "name", "vhost", "consumer_count",
                                                           "prefetch_count", "connection")
                                       if c["vhost"] == vhost and c["consumer_count"] == 1])
        assert channels and channels[0]["connection"] == mine[0]["name"], channels
        assert ctl.table("list_channels")[0] == ["pid", "user", "consumer_count", "messages_unacknowledged"]

        consumers = eventually(lambda: ctl.json("list_consumers", "-p", vhost))
        assert consumers and consumers[0]["queue_name"] == "jobs" and consumers[0]["consumer_tag"] == tag
        assert consumers[0]["prefetch_count"] == 7 and consumers[0]["ack_required"] is True
        assert consumers[0]["channel_pid"] == channels[0]["name"]

        ctl.ok("close_connection", mine[0]["name"], "closed by the ctl test")
        with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                connection.process_data_events(time_limit=0.2)
        assert closed.value.reply_code == 320
        assert "closed by the ctl test" in closed.value.reply_text
    finally:
        if connection.is_open:
            connection.close()
    r = ctl("close_connection", "no such connection", "bye")
    assert r.exit_code == 69, r.stderr


# --------------------------------------------------------------------------- policies


def test_policies_are_set_applied_listed_and_cleared(ctl, vhost, target):
    ctl.ok("set_policy", "-p", vhost, "--priority", "3", "--apply-to", "queues", "cap", "^capped-",
           '{"max-length": 2}')
    rows = ctl.table("list_policies", "-p", vhost)
    assert rows[0] == ["vhost", "name", "pattern", "apply-to", "definition", "priority"]
    assert [vhost, "cap", "^capped-", "queues", '{"max-length":2}', "3"] in rows
    assert ctl.json("list_policies", "-p", vhost)[0]["definition"] == {"max-length": 2}

    connection = target.amqp(vhost)
    try:
        channel = connection.channel()
        channel.queue_declare("capped-q")

        def capped():  # the broker applies it at once; RabbitMQ may take a moment to reach the queue
            for i in range(4):
                channel.basic_publish("", "capped-q", b"%d" % i)
            return channel.queue_declare("capped-q", passive=True).method.message_count == 2

        assert eventually(capped, timeout=5)
    finally:
        connection.close()

    ctl.ok("clear_policy", "-p", vhost, "cap")
    assert ctl.table("list_policies", "-p", vhost)[1:] == []
    r = ctl("clear_policy", "-p", vhost, "cap")
    assert r.exit_code == 69, r.stderr
    r = ctl("set_policy", "-p", vhost, "bad", ".*", "{not json")
    assert r.exit_code == 65, r.stderr
    r = ctl("set_policy", "-p", vhost, "bad", ".*", '{"no-such-key": 1}')
    assert r.exit_code == 65, r.stderr
    r = ctl("set_policy", "-p", f"{vhost}-missing", "p", ".*", '{"max-length": 1}')
    assert r.exit_code == 65 and "does not exist" in r.stderr
    r = ctl("set_policy", "-p", vhost, "--apply-to", "bananas", "p", ".*", '{"max-length": 1}')
    assert r.exit_code == 64


# --------------------------------------------------------------------------- definitions


def test_definitions_export_and_import_in_batches(ctl, vhost, target, tmp_path):
    connection = target.amqp(vhost)
    try:
        channel = connection.channel()
        channel.exchange_declare("defs-x", "direct", durable=True)
        for i in range(5):
            channel.queue_declare(f"defs-q{i}", durable=True, arguments={"x-max-length": 100 + i})
            channel.queue_bind(f"defs-q{i}", "defs-x", f"k{i}")
    finally:
        connection.close()
    ctl.ok("set_policy", "-p", vhost, "defs-pol", "^defs-", '{"message-ttl": 60000}', "--apply-to", "queues")

    exported = tmp_path / "defs.json"
    ctl.ok("export_definitions", "-p", vhost, str(exported))
    document = json.loads(exported.read_text())
    assert sorted(q["name"] for q in document["queues"]) == [f"defs-q{i}" for i in range(5)]
    assert {"x-max-length": 102} == next(q["arguments"] for q in document["queues"] if q["name"] == "defs-q2")
    assert [p["name"] for p in document["policies"]] == ["defs-pol"]

    for i in range(5):
        ctl.ok("delete_queue", "-p", vhost, f"defs-q{i}")
    ctl.ok("clear_policy", "-p", vhost, "defs-pol")
    # 5 queues + 1 exchange + 5 bindings + 1 policy = 12 objects, 5 per request: 3 batches, 3 progress lines
    r = ctl.ok("import_definitions", "-p", vhost, str(exported), "--batch-size", "5")
    progress_lines = [line for line in r.stderr.splitlines() if line.startswith("Importing definitions:")]
    assert len(progress_lines) == 3, r.stderr
    assert progress_lines[-1].startswith("Importing definitions: 12/12 objects (100%")
    def imported_queues():
        rows = ctl.table("list_queues", "-p", vhost, "-s", "name", "arguments")
        return [row for row in rows if row[0].startswith("defs-q")]

    rows = eventually(lambda: len(imported_queues()) == 5 and imported_queues())
    assert ["defs-q3", '{"x-max-length":103}'] in rows
    assert ["defs-x", "exchange", "defs-q4", "queue", "k4"] in [r[:5] for r in ctl.table("list_bindings", "-p", vhost)]
    assert [p["name"] for p in ctl.json("list_policies", "-p", vhost)] == ["defs-pol"]
    # -q: no progress
    assert ctl.ok("-q", "import_definitions", "-p", vhost, str(exported), "--batch-size", "5").stderr == ""

    # the whole broker to stdout, and back from stdin
    whole = ctl.ok("export_definitions", "-").stdout  # not decoded here: others' objects may nest deep
    assert whole.startswith("{") and json.dumps({"name": vhost}, separators=(",", ":"))[:-1] in whole.replace(": ", ":")
    mine = {"vhosts": [{"name": vhost}], "queues": [{"name": "defs-stdin", "vhost": vhost, "durable": True,
                                                      "auto_delete": False, "arguments": {}}]}
    ctl.ok("import_definitions", input=json.dumps(mine))
    assert eventually(lambda: "defs-stdin" in [row[0] for row in ctl.table("list_queues", "-p", vhost)])

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert ctl("import_definitions", str(bad)).exit_code == 65
    assert ctl("import_definitions", str(tmp_path / "missing.json")).exit_code == 66
    assert ctl("export_definitions", str(tmp_path / "no" / "dir" / "x.json")).exit_code == 73


# --------------------------------------------------------------------------- options, environment, exit codes


def test_exit_codes_for_usage_unreachable_and_refused(target):
    closed = f"http://127.0.0.1:{_free_port()}"
    r = _run("--url", closed, "list_queues")
    assert r.returncode == 69 and "unable to reach the broker" in r.stderr
    r = _run("--url", target.http_url, "--password", "wrong", "list_queues")
    assert r.returncode == 77, r.stderr
    r = _run("--url", target.http_url, "no_such_command")
    assert r.returncode == 64
    r = _run("--url", target.http_url, "add_user", "only-a-name")
    assert r.returncode == 64
    r = _run("--url", target.http_url, "list_queues", "--no-such-option")
    assert r.returncode == 64
    r = _run("--url", "ftp://example", "ping")
    assert r.returncode == 64


def test_credentials_and_address_from_the_environment(target, users):
    name = users.new()
    r = _run("add_user", name, "env-pw", env={"WARREN_CTL_URL": target.http_url})
    assert r.returncode == 0, r.stderr
    assert _run("set_user_tags", name, "administrator", env={"WARREN_CTL_URL": target.http_url}).returncode == 0
    env = {"WARREN_CTL_URL": target.http_url, "WARREN_CTL_USER": name, "WARREN_CTL_PASS": "env-pw"}
    r = _run("-q", "list_vhosts", env=env)
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "name" and r.stderr == "", r.stderr
    # options win over the environment
    assert _run("list_vhosts", "--password", "wrong", env=env).returncode == 77
    # the URL's user:pass@ is the last resort before guest/guest
    host = target.http_url.split("//", 1)[1]
    assert _run("ping", env={"WARREN_CTL_URL": f"http://{name}:env-pw@{host}"}).returncode == 0
    assert _run("ping", env={"WARREN_CTL_URL": f"http://{name}:bad@{host}"}).returncode == 77


def test_await_startup_waits_for_a_broker_and_times_out(start_broker):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    r = _run("--url", url, "await_startup", "--timeout", "1")
    assert r.returncode == 75, r.stderr
    assert time.monotonic() - started < 15
    assert "Waiting for the broker" in r.stderr and "did not start within 1 s" in r.stderr

    environment = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_CTL_")}
    waiter = subprocess.Popen([sys.executable, "-m", "warren", "ctl", "--url", url, "await_startup", "-t", "30"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        time.sleep(0.5)
        assert waiter.poll() is None  # nothing there yet: still waiting
        start_broker("--http-port", str(port))
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert "is up" in err
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


def test_what_ctl_changed_survives_kill_9(start_broker, tmp_path):
    """Definitions changed through ctl are durable before ctl returns (issue 13's rule)."""
    data = tmp_path / "durable-data"
    b = start_broker(data_dir=data)
    ctl = Ctl(Target("warren", b.http_url, b.port))
    ctl.ok("add_vhost", "kept")
    ctl.ok("add_user", "keeper", "pw")
    ctl.ok("set_user_tags", "keeper", "policymaker")
    ctl.ok("set_permissions", "-p", "kept", "keeper", "^k-", "^k-", "^k-")
    ctl.ok("set_vhost_limits", "-p", "kept", '{"max-queues": 9}')
    ctl.ok("set_policy", "-p", "kept", "cap", "^k-", '{"max-length": 3}')
    b.proc.kill()  # SIGKILL: no shutdown, no flush
    b.proc.wait(timeout=10)

    b2 = start_broker(data_dir=data)
    ctl = Ctl(Target("warren", b2.http_url, b2.port))
    assert "kept" in [row[0] for row in ctl.table("list_vhosts")]
    assert {"user": "keeper", "tags": ["policymaker"]} in ctl.json("list_users")
    assert ["keeper", "^k-", "^k-", "^k-"] in ctl.table("list_permissions", "-p", "kept")
    assert ctl.json("list_vhost_limits", "-p", "kept") == {"max-queues": 9}
    assert [p["name"] for p in ctl.json("list_policies", "-p", "kept")] == ["cap"]
    assert ctl("ping", "--username", "keeper", "--password", "pw").exit_code == 0
