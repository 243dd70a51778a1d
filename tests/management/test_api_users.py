"""Users over the HTTP API (warren/management/api/users.py, user_limits.py, auth.py): user limits
shown on every user as RabbitMQ 3.10 shows them, set by PUT /api/users and by a definitions
import (``users[].limits``), and failed HTTP logins slowed and then refused per address by the
login throttle (warren/access/login_throttle.py), through real HTTP and AMQP clients.

The user-limit tests run the same steps against the session's private RabbitMQ node
(``rabbitmq_node``; Warren alone where rabbitmq-server is not installed), with throw-away users
that are deleted afterwards, and compare."""

from __future__ import annotations

import base64
import json
import socket
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e.test_limits import _login as amqp_login  # a raw AMQP login from a chosen source address
from tests.management.api_client import call, q
from tests.rabbitmq_node import rabbitmq_missing

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

HASH = "3ejaiHBKbOgqKTyq4Y4JtKDcgCI8g24aDnw2MBDVEhGZZkrB"  # a valid rabbit_password_hashing_sha256 hash


@pytest.fixture
def users(request, broker, uid):
    """(base URLs, made): Warren's API first, then the session's RabbitMQ node's where
    rabbitmq-server is installed; the users named in ``made`` are deleted on both at the end."""
    bases = [broker.http_url]
    if rabbitmq_missing() is None:
        bases.append(request.getfixturevalue("rabbitmq_node").http_url)
    made: list[str] = []
    yield bases, made
    for base in bases:
        for name in made:
            call(base, "DELETE", f"/api/users/{q(name)}")


def user_limits_steps(base: str, name: str) -> list:
    """The same steps on one broker; what each answered (status, and the limits shown)."""
    seen = []
    status = call(base, "PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": ""})[0]
    seen.append(("create", status, call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
    for limit, value in (("max-connections", 5), ("max-channels", -1)):
        status = call(base, "PUT", f"/api/user-limits/{q(name)}/{limit}", {"value": value})[0]
        seen.append((limit, status))
    seen.append(("one", call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
    listed = {u["name"]: u for u in call(base, "GET", "/api/users")[1]}
    seen.append(("list", listed[name]["limits"], list(listed[name]["limits"])))  # keys in RabbitMQ's order
    without = {u["name"]: u for u in call(base, "GET", "/api/users/without-permissions")[1]}
    seen.append(("without-permissions", without[name]["limits"]))
    columns = call(base, "GET", "/api/users?columns=name,limits")[1]
    seen.append(("columns", [u for u in columns if u["name"] == name]))
    # a PUT of the user with limits sets those over the old ones (RabbitMQ 3.10)
    status = call(base, "PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": "management",
                                                        "limits": {"max-connections": 1}})[0]
    seen.append(("put with limits", status, call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
    # a PUT without limits keeps them
    call(base, "PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": ""})
    seen.append(("put without", call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
    for limit in ("max-connections", "max-channels"):
        call(base, "DELETE", f"/api/user-limits/{q(name)}/{limit}")
    seen.append(("cleared", call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
    return seen


def test_user_limits_are_shown_on_the_user_as_rabbitmq_shows_them(users, uid):
    bases, made = users
    name = f"h18-lim-{uid}"
    made.append(name)
    answers = {base: user_limits_steps(base, name) for base in bases}
    ours = answers[bases[0]]
    assert ours == [
        ("create", 201, {}),
        ("max-connections", 204), ("max-channels", 204),
        ("one", {"max-channels": -1, "max-connections": 5}),
        ("list", {"max-channels": -1, "max-connections": 5}, ["max-channels", "max-connections"]),
        ("without-permissions", {"max-channels": -1, "max-connections": 5}),
        ("columns", [{"name": name, "limits": {"max-channels": -1, "max-connections": 5}}]),
        ("put with limits", 204, {"max-channels": -1, "max-connections": 1}),
        ("put without", {"max-channels": -1, "max-connections": 1}),
        ("cleared", {}),
    ]
    for base in bases[1:]:  # RabbitMQ answered the same steps the same way
        assert answers[base] == ours, base


def test_a_put_with_bad_limits_is_refused_and_changes_nothing(broker, users, uid):
    _, made = users
    name = f"h18-bad-{uid}"
    made.append(name)
    base = broker.http_url
    assert call(base, "PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": "management"})[0] == 201
    before = call(base, "GET", f"/api/users/{q(name)}")[1]
    for limits in ({"bogus": 1}, {"max-channels": "3"}, 5):
        status, body, _ = call(base, "PUT", f"/api/users/{q(name)}", {"password": "other", "tags": "",
                                                                     "limits": limits})
        assert status == 400 and body["error"] == "bad_request", (limits, body)  # RabbitMQ: 500
    assert call(base, "GET", f"/api/users/{q(name)}")[1] == before  # password and tags unchanged too


def test_definitions_import_sets_users_limits_over_the_old_ones(broker, users, uid):
    bases, made = users
    name = f"h18-imp-{uid}"
    made.append(name)
    seen = {}
    for base in bases:
        steps = []
        for limits in ({"max-connections": 3}, {"max-channels": 7}, None, {}):
            user = {"name": name, "password_hash": HASH, "hashing_algorithm": "rabbit_password_hashing_sha256",
                    "tags": []}
            if limits is not None:
                user["limits"] = limits
            status = call(base, "POST", "/api/definitions", {"users": [user]})[0]
            steps.append((status, call(base, "GET", f"/api/users/{q(name)}")[1]["limits"]))
        seen[base] = steps
    assert seen[broker.http_url] == [(204, {"max-connections": 3}),
                                     (204, {"max-channels": 7, "max-connections": 3}),
                                     (204, {"max-channels": 7, "max-connections": 3}),
                                     (204, {"max-channels": 7, "max-connections": 3})]
    for base in bases[1:]:  # and RabbitMQ the same
        assert seen[base] == seen[broker.http_url], base
    # a bad limit in a file is refused with the user named (RabbitMQ: 500), the old ones stay
    status, body, _ = call(broker.http_url, "POST", "/api/definitions", {"users": [
        {"name": name, "password_hash": HASH, "tags": [], "limits": {"max-channels": "x"}}]})
    assert status == 400 and name in body["reason"]
    assert call(broker.http_url, "GET", f"/api/users/{q(name)}")[1]["limits"] == {"max-channels": 7,
                                                                                   "max-connections": 3}


def test_imported_user_limits_are_enforced_over_amqp(start_broker, tmp_path, uid):
    """A --definitions file's users[].limits are in force for that user's AMQP connections."""
    name = f"h18-amqp-{uid}"
    defs = tmp_path / "defs.json"
    defs.write_text(json.dumps({
        "users": [{"name": name, "password_hash": HASH, "tags": [], "limits": {"max-connections": 1}}],
        "vhosts": [{"name": "/"}],
        "permissions": [{"user": name, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}]}))
    b = start_broker("--definitions", str(defs))
    status, user, _ = call(b.http_url, "GET", f"/api/users/{q(name)}")
    assert status == 200 and user["limits"] == {"max-connections": 1}
    # HASH is the hash of no password we know: set one, which keeps the limits
    call(b.http_url, "PUT", f"/api/users/{q(name)}", {"password": "pw", "tags": ""})
    params = pika.ConnectionParameters(b.host, b.port, "/", pika.PlainCredentials(name, "pw"), connection_attempts=1)
    with pika.BlockingConnection(params):
        with pytest.raises(pika.exceptions.ProbableAccessDeniedError, match="530"):
            pika.BlockingConnection(params)


# --- failed HTTP logins: the login throttle ---------------------------------------------------------


def http_get(port: int, path: str, user: str | None, password: str = "", source: str = "127.0.0.1",
             timeout: float = 10.0) -> tuple[int, dict, bytes, float]:
    """One raw HTTP/1.1 request from ``source``: (status, headers, body, seconds to the answer)."""
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    if user is not None:
        head += "Authorization: Basic " + base64.b64encode(f"{user}:{password}".encode()).decode() + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as s:
        started = time.monotonic()
        s.sendall((head + "\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        took = time.monotonic() - started
    head_part, _, body = data.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return int(lines[0].split()[1]), headers, body, took


def assert_login_failed(status, headers, body) -> None:
    """RabbitMQ's answer to wrong credentials, whatever the throttle did."""
    assert status == 401
    assert headers["www-authenticate"] == 'Basic realm="RabbitMQ Management"'
    assert json.loads(body) == {"error": "not_authorized", "reason": "Login failed"}


def wait_for_log(b, text: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in b.log():
            return True
        time.sleep(0.05)
    return False


def test_failed_http_logins_are_delayed_then_refused_per_address(start_broker):
    b = start_broker("--login-throttle-loopback", "--login-failure-limit", "6", "--login-failure-delay", "0.5",
                     "--login-block-time", "30")
    attacker = "127.0.0.2"
    for _ in range(8):  # no credentials at all is not a failed login: nothing counted, nothing slowed
        status, _, _, took = http_get(b.http_port, "/api/whoami", None, source=attacker)
        assert status == 401 and took < 0.45
    timings = []
    for _ in range(5):
        status, headers, body, took = http_get(b.http_port, "/api/whoami", "guest", "wrong", source=attacker)
        assert_login_failed(status, headers, body)
        timings.append(took)
    assert max(timings[:3]) < 0.45, timings  # the first few at once
    assert min(timings[3:]) >= 0.45, timings  # then each answer waits
    # another address meanwhile: not slowed, not blocked
    status, _, body, took = http_get(b.http_port, "/api/whoami", "guest", "guest", source="127.0.0.1")
    assert status == 200 and json.loads(body)["name"] == "guest" and took < 0.45
    # the sixth failure blocks the address: even the right password gets the usual 401, at once
    http_get(b.http_port, "/api/whoami", "guest", "wrong", source=attacker)
    status, headers, body, took = http_get(b.http_port, "/api/whoami", "guest", "guest", source=attacker)
    assert_login_failed(status, headers, body)
    assert took < 0.45
    # the reason is in the log, never in the answer
    assert wait_for_log(b, "too many failed logins from 127.0.0.2")
    log = b.log()
    assert "HTTP API login refused for user 'guest' from 127.0.0.2" in log
    assert "wrong password" in log and "answered after 0.5s (login throttle)" in log
    # one throttle for AMQP and HTTP: the blocked address cannot log in over AMQP either
    close, _ = amqp_login(b, "guest", "guest", source=attacker)
    assert close is not None and close.reply_code == 403
    # others still use the API and AMQP
    assert call(b.http_url, "GET", "/api/whoami")[0] == 200
    assert amqp_login(b, "guest", "guest")[0] is None


def test_failed_http_logins_from_loopback_are_not_throttled_by_default(start_broker):
    b = start_broker("--login-failure-limit", "3", "--login-failure-delay", "0.5")
    for _ in range(5):
        status, headers, body, took = http_get(b.http_port, "/api/whoami", "guest", "wrong")
        assert_login_failed(status, headers, body)
        assert took < 0.45
    assert http_get(b.http_port, "/api/whoami", "guest", "guest")[0] == 200
