"""Limits and brute-force protection through real clients (issue 16 points 3-4, docs/security.md).

Each limit is set low on a private broker, passed, and refused with RabbitMQ's reply code and
text, the broker's log saying what and who, and everyone else still served. The user limits
run against the session's private RabbitMQ node too (``rabbitmq_node``: the same HTTP calls
and AMQP refusals).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import struct
import time
import urllib.error
import urllib.request
import uuid

import pika
import pytest
from pika.exceptions import ConnectionClosedByBroker, ProbableAccessDeniedError, ProbableAuthenticationError

from tests.conftest import EXTERNAL_URL
from tests.e2e.helpers import wait_until
from tests.e2e.rawamqp import (
    CONNECTION_CLOSE, CONNECTION_START, CONNECTION_TUNE, FRAME_BODY, FRAME_HEADER, PROTOCOL_HEADER,
    QUEUE_DECLARE_OK, RawConnection, basic_consume, basic_publish, exchange_declare, frame,
    parse_close, queue_declare, start_ok,
)

LOGIN_REFUSED = ("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
                 "For details see the broker logfile.")


def connect(host, port, user="guest", password="guest") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host, port, "/", pika.PlainCredentials(user, password), connection_attempts=1,
        socket_timeout=10, stack_timeout=15, blocked_connection_timeout=15))


def round_trip(conn: pika.BlockingConnection) -> None:
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"ping")
    assert wait_until(lambda: ch.basic_get(q, auto_ack=True)[2] == b"ping", timeout=10)
    ch.close()


def wait_for_log(b, text: str, timeout: float = 10.0) -> bool:
    return wait_until(lambda: text in b.log(), timeout=timeout)


# --- the HTTP API of either broker ------------------------------------------------------------


class Api:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(self, method: str, path: str, body=None) -> tuple[int, object]:
        req = urllib.request.Request(self.base + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                data = r.read()
                return r.status, json.loads(data) if data else None
        except urllib.error.HTTPError as e:
            data = e.read()
            return e.code, json.loads(data) if data else None


@pytest.fixture(params=["warren", "rabbitmq"])
def target(request):
    """(amqp host, amqp port, Api, Warren's BrokerProc or None) of a private Warren or of the
    session's RabbitMQ node."""
    if request.param == "rabbitmq":
        node = request.getfixturevalue("rabbitmq_node")
        return node.host, node.amqp_port, Api(node.http_url), None
    b = request.getfixturevalue("start_broker")()
    return b.host, b.port, Api(b.http_url), b


def test_user_limits_refuse_connections_and_channels_as_rabbitmq(target):
    host, port, api, b = target
    user = f"h15-limits-{uuid.uuid4().hex[:8]}"
    assert api.call("PUT", f"/api/users/{user}", {"password": "pw", "tags": ""})[0] in (201, 204)
    try:
        assert api.call("PUT", f"/api/permissions/%2F/{user}", {"configure": ".*", "write": ".*", "read": ".*"})[0] \
            in (201, 204)
        assert api.call("PUT", f"/api/user-limits/{user}/max-connections", {"value": 1})[0] == 204
        assert api.call("PUT", f"/api/user-limits/{user}/max-channels", {"value": 2})[0] == 204
        status, rows = api.call("GET", f"/api/user-limits/{user}")
        assert status == 200 and rows == [{"user": user, "value": {"max-connections": 1, "max-channels": 2}}]
        everyone = api.call("GET", "/api/user-limits")[1]
        assert {"user": user, "value": {"max-connections": 1, "max-channels": 2}} in everyone
        # refusals of the API, as RabbitMQ words them
        status, err = api.call("PUT", f"/api/user-limits/{user}/max-foo", {"value": 2})
        assert status == 400 and "max-foo" in err["reason"]
        status, err = api.call("PUT", f"/api/user-limits/{user}/max-channels", {"value": "x"})
        assert status == 400 and "should be a number" in err["reason"]
        status, err = api.call("PUT", f"/api/user-limits/nobody-{user}/max-channels", {"value": 2})
        assert status == 400 and err["reason"] == ["no_such_user", f"nobody-{user}"]
        assert api.call("GET", f"/api/user-limits/nobody-{user}")[0] == 404

        first = connect(host, port, user, "pw")
        try:
            with pytest.raises(ProbableAccessDeniedError) as e:
                connect(host, port, user, "pw")
            assert (f"NOT_ALLOWED - connection refused for user '{user}': user connection limit (1) is reached"
                    in str(e.value))
            first.channel()
            first.channel()
            with pytest.raises(ConnectionClosedByBroker) as e:
                first.channel()
            assert e.value.reply_code == 530
            assert e.value.reply_text == (f"NOT_ALLOWED - number of channels opened for user '{user}' has reached "
                                          "the maximum allowed user limit of (2)")
        finally:
            if first.is_open:
                first.close()
        if b is not None:
            assert "user connection limit (1) is reached" in b.log()
        # cleared (twice: 204 either way); the user connects twice again
        for _ in range(2):
            assert api.call("DELETE", f"/api/user-limits/{user}/max-connections")[0] == 204
        assert api.call("GET", f"/api/user-limits/{user}")[1] == [{"user": user, "value": {"max-channels": 2}}]
        assert wait_until(lambda: _connects_twice(host, port, user), timeout=10)
    finally:
        api.call("DELETE", f"/api/users/{user}")


def _connects_twice(host, port, user) -> bool:
    try:
        a = connect(host, port, user, "pw")
    except pika.exceptions.AMQPError:
        return False
    try:
        connect(host, port, user, "pw").close()
        return True
    except pika.exceptions.AMQPError:
        return False
    finally:
        a.close()


def test_user_limits_survive_a_restart(start_broker, tmp_path):
    b = start_broker()
    api = Api(b.http_url)
    assert api.call("PUT", "/api/user-limits/guest/max-connections", {"value": 3})[0] == 204
    b.stop()
    b2 = start_broker(data_dir=b.data_dir)
    assert Api(b2.http_url).call("GET", "/api/user-limits")[1] == [{"user": "guest", "value": {"max-connections": 3}}]


def test_connection_max_refuses_at_open_and_frees_on_close(start_broker):
    b = start_broker("--connection-max", "2")
    a, c = connect(b.host, b.port), connect(b.host, b.port)
    with pytest.raises(ProbableAccessDeniedError) as e:
        connect(b.host, b.port)
    assert "NOT_ALLOWED - connection refused: node connection limit (2) is reached" in str(e.value)
    assert wait_for_log(b, "node connection limit (2) is reached")
    round_trip(a)  # those inside are served
    a.close()
    assert wait_until(lambda: _connects(b), timeout=10)
    c.close()


def _connects(b) -> bool:
    try:
        connect(b.host, b.port).close()
        return True
    except pika.exceptions.AMQPError:
        return False


def test_consumer_max_per_channel(start_broker):
    b = start_broker("--consumer-max-per-channel", "2")
    control = connect(b.host, b.port)
    conn = connect(b.host, b.port)
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_consume(q, lambda *a: None)
    ch.basic_consume(q, lambda *a: None)
    other = conn.channel()  # the limit is per channel
    other.basic_consume(q, lambda *a: None)
    with pytest.raises(ConnectionClosedByBroker) as e:
        ch.basic_consume(q, lambda *a: None)
    assert e.value.reply_code == 530
    assert e.value.reply_text == "NOT_ALLOWED - reached maximum (2) of consumers per channel"
    assert wait_for_log(b, "reached maximum (2) of consumers per channel")
    round_trip(control)
    control.close()


@pytest.mark.parametrize("what", ["queue.declare", "exchange.declare", "consumer tag"])
def test_names_that_are_not_utf8_are_a_frame_error_as_rabbitmq(broker, what):
    with RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        bad = b"h15-\xff\xfe-" + uuid.uuid4().hex[:6].encode()
        if what == "queue.declare":
            c.send(queue_declare(1, bad, auto_delete=True))
        elif what == "exchange.declare":
            c.send(exchange_declare(1, bad, "direct"))
        else:
            c.send(queue_declare(1, "", exclusive=True))
            c.expect(QUEUE_DECLARE_OK, 1)
            c.send(basic_consume(1, "amq.rabbitmq.reply-to", bad, no_ack=True))
        close = c.expect_connection_close()
        assert (close.reply_code, close.reply_text) == (501, "FRAME_ERROR - Malformed UTF-8 in shortstr")
    if not EXTERNAL_URL:
        assert wait_for_log(broker, "Malformed UTF-8 in shortstr")


def test_a_name_of_255_octets_of_utf8_is_accepted(broker, uid):
    name = f"h15-{uid}-" + "é" * ((255 - 16) // 2)
    assert len(name.encode()) <= 255
    with RawConnection(broker.host, broker.port) as c:
        c.handshake()
        c.open_channel(1)
        assert c.declare_queue(1, name, exclusive=True)[0] == name


def _publish_frames(body: bytes, frame_max: int = 131072) -> bytes:
    header = frame(FRAME_HEADER, 1, struct.pack(">HHQH", 60, 0, len(body), 0))
    step = frame_max - 8
    bodies = b"".join(frame(FRAME_BODY, 1, body[i:i + step]) for i in range(0, len(body), step))
    return basic_publish(1, "", "nowhere") + header + bodies


@pytest.mark.parametrize("split", [False, True], ids=["one-write", "frame-by-frame"])
def test_max_message_size_in_both_publish_paths(start_broker, split):
    b = start_broker("--max-message-size", "4096")
    with RawConnection(b.host, b.port) as c:
        c.handshake()
        c.open_channel(1)
        ok, big = _publish_frames(b"x" * 4096), _publish_frames(b"x" * 4097)
        for data in (ok, big):
            if split:  # byte by byte for the header, so the Python twin of the fast path decodes it
                for i in range(0, len(data), 7):
                    c.send(data[i:i + 7])
            else:
                c.send(data)
        close = c.expect_channel_close(1)
        assert close.reply_code == 406
        assert close.reply_text == "PRECONDITION_FAILED - message size 4097 is larger than configured max size 4096"


def _idle_sockets(b, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection((b.host, b.port), timeout=5)
        socks.append(s)
    return socks


def _closed_at_once(s: socket.socket, timeout: float = 3.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("workers", ["1", "2"])
def test_unauthenticated_connections_past_the_limit_are_closed_at_accept(start_broker, workers):
    b = start_broker("--max-unauthenticated-connections", "20", "--workers", workers)
    inside = connect(b.host, b.port)  # an open connection does not count
    idle = _idle_sockets(b, 20)
    try:
        extra = socket.create_connection((b.host, b.port), timeout=5)
        assert _closed_at_once(extra)
        extra.close()
        assert wait_for_log(b, "connection(s) at accept")
        assert "limit 20, --max-unauthenticated-connections" in b.log()
        round_trip(inside)
    finally:
        for s in idle:
            s.close()
    # their slots are free again once they are gone
    assert wait_until(lambda: _connects(b), timeout=10)
    inside.close()


def test_a_client_that_does_not_read_its_output_is_closed(start_broker):
    b = start_broker("--max-output-buffer", str(1 << 20), "--max-message-size", "65536")
    control = connect(b.host, b.port)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    s.settimeout(10)
    s.connect((b.host, b.port))
    raw = RawConnection.__new__(RawConnection)
    raw.timeout, raw.sock, raw.buf = 10.0, s, b""
    raw.handshake(heartbeat=0)
    raw.open_channel(1)
    body = b"r" * 60000
    publish = basic_publish(1, "", "nowhere-" + uuid.uuid4().hex, mandatory=True) + \
        frame(FRAME_HEADER, 1, struct.pack(">HHQH", 60, 0, len(body), 0)) + frame(FRAME_BODY, 1, body)
    # every mandatory publish to nowhere comes back as basic.return with its body: never read
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and "not read by the client" not in b.log():
            s.sendall(publish * 20)
    except OSError:
        pass  # the broker closed it under us
    assert wait_for_log(b, "octets of output not read by the client")
    s.close()
    round_trip(control)
    control.close()


# --- failed logins ------------------------------------------------------------------------------


def _login(b, user: str, password: str, source: str = "127.0.0.1") -> tuple[object, float]:
    """(None on success, else the connection.close) and the seconds start-ok took to answer."""
    s = socket.create_connection((b.host, b.port), timeout=10, source_address=(source, 0))
    raw = RawConnection.__new__(RawConnection)
    raw.timeout, raw.sock, raw.buf = 10.0, s, b""
    with raw:
        raw.send(PROTOCOL_HEADER)
        raw.expect(CONNECTION_START, 0)
        started = time.monotonic()
        raw.send(start_ok(user, password))
        f = raw.read_method(timeout=10)
        elapsed = time.monotonic() - started
        if f.method == CONNECTION_TUNE:
            return None, elapsed
        assert f.method == CONNECTION_CLOSE, f
        return parse_close(f), elapsed


@pytest.mark.parametrize("workers", ["1", "2"])  # with --workers the supervisor does the login
def test_failed_logins_are_delayed_then_refused_per_address(start_broker, workers):
    b = start_broker("--login-throttle-loopback", "--login-failure-limit", "6", "--login-failure-delay", "0.5",
                     "--login-block-time", "30", "--workers", workers)
    attacker = "127.0.0.2"
    timings = []
    for _ in range(5):
        close, took = _login(b, "guest", "wrong", source=attacker)
        assert (close.reply_code, close.reply_text) == (403, LOGIN_REFUSED)
        timings.append(took)
    assert max(timings[:3]) < 0.45, timings  # the first few at once
    assert min(timings[3:]) >= 0.45, timings  # then each answer waits
    # another address meanwhile: not slowed, not blocked
    close, took = _login(b, "guest", "guest", source="127.0.0.1")
    assert close is None and took < 0.45
    # the sixth failure blocks the address: even the right password gets the usual 403, at once
    _login(b, "guest", "wrong", source=attacker)
    close, took = _login(b, "guest", "guest", source=attacker)
    assert (close.reply_code, close.reply_text) == (403, LOGIN_REFUSED) and took < 0.45
    assert wait_for_log(b, "too many failed logins from 127.0.0.2")
    assert "answered after 0.5s (login throttle)" in b.log()
    with connect(b.host, b.port) as ok:  # others still log in
        round_trip(ok)
    # one throttle for the node: the HTTP API (a worker's, with --workers) refuses the address too
    assert _http_whoami(b, "guest", "guest", source=attacker) == 401
    assert _http_whoami(b, "guest", "guest") == 200


def _http_whoami(b, user: str, password: str, source: str = "127.0.0.1") -> int:
    """The status of ``GET /api/whoami`` from ``source``."""
    conn = http.client.HTTPConnection("127.0.0.1", b.http_port, timeout=10, source_address=(source, 0))
    try:
        auth = base64.b64encode(f"{user}:{password}".encode()).decode()
        conn.request("GET", "/api/whoami", headers={"Authorization": f"Basic {auth}"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_loopback_addresses_are_not_throttled_by_default(start_broker):
    b = start_broker("--login-failure-limit", "3", "--login-failure-delay", "0.5")
    for _ in range(5):
        close, took = _login(b, "guest", "wrong")
        assert close.reply_code == 403 and took < 0.45
    assert _login(b, "guest", "guest")[0] is None


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only picks the outgoing address
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_loopback_users_setting(start_broker, tmp_path):
    addr = _non_loopback_address()
    if addr is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    b = start_broker("--host", "0.0.0.0", "--loopback-users", "")
    with connect(addr, b.port) as c:  # guest from afar: allowed explicitly
        round_trip(c)
    b2 = start_broker("--host", "0.0.0.0", data_dir=tmp_path / "other")
    with pytest.raises(ProbableAuthenticationError):
        connect(addr, b2.port)
    assert wait_for_log(b2, "user may only connect via localhost")
