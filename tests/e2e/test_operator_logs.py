"""Logs an operator can act on (issue 12 point 7): refused logins say who and why, and each
connection's close is logged exactly once with peer, user, vhost, client name, lifetime and cause.

Every test reads the broker's own log (``BrokerProc.log()``) and finds its connection by the
client's local port, so tests sharing the session broker do not see each other's lines.
"""

from __future__ import annotations

import re
import socket
import time

import pika
import pytest

from tests.conftest import EXTERNAL_URL
from tests.e2e import rawamqp

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="reads the Warren broker's own log")

# Where the log stood when the running test began: an earlier test's connection may have had the
# same local port (the kernel reuses them), so each test reads only the lines written since.
# A test's own broker is read from its start.
_log_start: dict[object, int] = {}


@pytest.fixture(autouse=True)
def _only_this_tests_lines(broker):
    _log_start.clear()
    _log_start[broker.log_path] = len(broker.log())


def lines_for(b, port: int, needle: str) -> list[str]:
    return [ln for ln in b.log()[_log_start.get(b.log_path, 0):].splitlines()
            if f"127.0.0.1:{port} " in ln and needle in ln]


def wait_lines(b, port: int, needle: str, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = lines_for(b, port, needle)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no log line with 127.0.0.1:{port} and {needle!r}:\n{b.log()[-3000:]}")


def refused_login(b, user: str, password: str) -> tuple[int, str]:
    """Log in over a raw socket with bad credentials; (local port, the error line)."""
    with rawamqp.RawConnection(b.host, b.port) as c:
        port = c.sock.getsockname()[1]
        c.send(rawamqp.PROTOCOL_HEADER)
        c.expect(rawamqp.CONNECTION_START, 0)
        c.send(rawamqp.start_ok(user, password))
        close = c.expect_connection_close()
        assert close.reply_code == 403
    return port, wait_lines(b, port, "login refused")[0]


@pytest.mark.parametrize("user,password,reason", [
    ("nobody-h3", "x", "unknown user"),
    ("guest", "not-the-password", "wrong password"),
])
def test_a_refused_login_names_the_user_and_why(broker, user, password, reason):
    port, line = refused_login(broker, user, password)
    assert f"login refused for user '{user}'" in line
    assert "403" in line and "WARNING" in line
    assert reason in line  # the access store's reason (warren/access LoginRefused), in the log only


def test_a_login_to_an_unknown_vhost_names_user_and_vhost(broker):
    with rawamqp.RawConnection(broker.host, broker.port) as c:
        port = c.sock.getsockname()[1]
        c.handshake(open_vhost=False)
        c.send(rawamqp.connection_open("no-such-vhost-h3"))
        assert c.expect_connection_close().reply_code in (530, 403)
    line = wait_lines(broker, port, "no-such-vhost-h3")[0]
    assert "user=guest" in line or "user 'guest'" in line


def close_lines(b, port: int) -> list[str]:
    wait_lines(b, port, "connection closed:")
    time.sleep(0.2)  # a second line, if there were one, would come right after
    return lines_for(b, port, "connection closed:")


def test_a_client_close_is_logged_once_with_everything(broker):
    params = pika.ConnectionParameters(broker.host, broker.port,
                                       client_properties={"connection_name": "orders-h3"})
    conn = pika.BlockingConnection(params)
    port = conn._impl._transport._sock.getsockname()[1]
    time.sleep(0.3)
    conn.close()
    (line,) = close_lines(broker, port)
    assert 'user=guest vhost=/ client="orders-h3"' in line
    assert "client closed the connection (200 Normal shutdown)" in line
    lived = float(re.search(r"lived ([0-9.]+)s", line).group(1))
    assert 0.2 <= lived < 30


def test_the_product_names_a_client_without_connection_name(broker):
    with rawamqp.RawConnection(broker.host, broker.port) as c:
        port = c.sock.getsockname()[1]
        c.handshake()
        c.send(rawamqp.connection_close())
        c.expect(rawamqp.CONNECTION_CLOSE_OK, 0)
    (line,) = close_lines(broker, port)
    assert "client closed the connection (200 bye)" in line
    assert re.search(r'client="[^"-]', line)


def test_eof_without_close_is_logged(broker):
    with rawamqp.RawConnection(broker.host, broker.port) as c:
        port = c.sock.getsockname()[1]
        c.handshake()
    (line,) = close_lines(broker, port)
    assert "user=guest vhost=/" in line
    assert "client closed the socket (EOF) without connection.close" in line


def test_a_reset_is_logged(broker):
    c = rawamqp.RawConnection(broker.host, broker.port)
    port = c.sock.getsockname()[1]
    c.handshake()
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.sock.close()  # linger 0: RST instead of FIN
    (line,) = close_lines(broker, port)
    assert "user=guest vhost=/" in line
    # the kernel may report the reset as an error or as plain end of file
    assert "socket error" in line or "EOF" in line


def test_a_connection_error_is_logged_with_its_code(broker):
    with rawamqp.RawConnection(broker.host, broker.port) as c:
        port = c.sock.getsockname()[1]
        c.handshake()
        c.send(rawamqp.basic_get(7, "q"))  # channel 7 was never opened: 504
        close = c.expect_connection_close()
    assert close.reply_code == 504
    (line,) = close_lines(broker, port)
    assert "connection error 504" in line and "user=guest" in line


def test_a_login_refusal_closes_with_the_reason(broker):
    port, _ = refused_login(broker, "nobody2-h3", "x")
    (line,) = close_lines(broker, port)
    assert "login refused for user 'nobody2-h3'" in line and "403" in line


def test_heartbeat_timeout_is_logged(start_broker):
    b = start_broker("--heartbeat", "1")
    c = rawamqp.RawConnection(b.host, b.port)
    try:
        port = c.sock.getsockname()[1]
        c.handshake(heartbeat=1)
        (line,) = [ln for ln in [wait_lines(b, port, "connection closed:", timeout=15)[0]]]
        assert "heartbeat timeout" in line and "user=guest" in line
    finally:
        c.close()


def test_shutdown_is_logged_for_each_connection(start_broker):
    b = start_broker()
    conns = [pika.BlockingConnection(pika.ConnectionParameters(b.host, b.port)) for _ in range(2)]
    ports = [c._impl._transport._sock.getsockname()[1] for c in conns]
    b.stop()
    for port in ports:
        (line,) = lines_for(b, port, "connection closed:")
        assert "broker shutdown (320 CONNECTION_FORCED)" in line
