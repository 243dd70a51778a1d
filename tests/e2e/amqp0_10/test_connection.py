"""The 0-10 connection on Warren's port: the header, logins (PLAIN, AMQPLAIN, ANONYMOUS only when
configured, the failed-login answer), the virtual host and permissions of the one user store,
heartbeats, sessions and their detach."""

from __future__ import annotations

import socket
import time

import base64
import json
import urllib.request

import pytest

from warren.protocol.amqp0_10 import events as ev
from warren.spec import amqp0_10 as spec

from .client010 import Client010, SessionException


def test_the_0_10_header_is_answered_with_0_10_and_connection_start(broker):
    with socket.create_connection((broker.host, broker.port), timeout=5) as s:
        s.sendall(b"AMQP\x01\x01\x00\x0a")
        data = b""
        deadline = time.monotonic() + 5
        while len(data) < 20 and time.monotonic() < deadline:
            data += s.recv(4096)
    assert data[:8] == b"AMQP\x01\x01\x00\x0a"
    assert data[8 + 12:8 + 14] == b"\x01\x01"  # the first control: connection.start


@pytest.mark.parametrize("mechanism", ["PLAIN", "AMQPLAIN"])
def test_login_with_password_mechanisms(broker, mechanism):
    with Client010(broker, mechanism=mechanism) as c:
        assert c.conn.is_open
        assert "ANONYMOUS" not in c.conn.start.mechanisms  # not offered unless configured


def test_wrong_password_closes_with_connection_forced(broker):
    c = Client010(broker, password="wrong", handshake=False)
    try:
        closed = c.wait(ev.ConnectionClosed)
        assert closed.code == spec.ConnectionCloseCode.CONNECTION_FORCED and closed.by_peer
    finally:
        c.sock.close()


def test_anonymous_is_refused_unless_configured_then_logs_in_as_that_user(broker, start_broker):
    c = Client010(broker, mechanism="ANONYMOUS", handshake=False)
    try:
        assert c.wait(ev.ConnectionClosed).code == spec.ConnectionCloseCode.CONNECTION_FORCED
    finally:
        c.sock.close()
    b = start_broker("--anonymous-user", "guest")
    with Client010(b, mechanism="ANONYMOUS") as c:
        assert "ANONYMOUS" in c.conn.start.mechanisms
        s = c.session(1)
        s.send(spec.QueueDeclare(queue="anon-q", auto_delete=True))


def test_vhost_from_open_or_default_and_unknown_vhost_refused(broker):
    with Client010(broker, virtual_host="/") as c:
        assert c.conn.is_open
    c = Client010(broker, virtual_host="no-such-vhost", handshake=False)
    try:
        closed = c.wait(ev.ConnectionClosed)
        assert closed.code == spec.ConnectionCloseCode.INVALID_PATH
    finally:
        c.sock.close()


def test_permissions_of_the_user_store_apply(start_broker):
    b = start_broker()
    _put(b, "/users/reader", {"password": "pw", "tags": ""})
    _put(b, "/permissions/%2F/reader", {"configure": "^$", "write": "^$", "read": ".*"})
    with Client010(b, "reader", "pw") as c:
        s = c.session(1)
        with pytest.raises(SessionException) as e:
            s.send(spec.QueueDeclare(queue="not-allowed"))
        assert e.value.code == 403
        s2 = c.session(2)  # another session of the same connection carries on
        assert s2.send(spec.ExchangeQuery(name="amq.direct")).type == "direct"
    with Client010(b, "reader", "wrong", handshake=False) as c:
        assert c.wait(ev.ConnectionClosed).code == spec.ConnectionCloseCode.CONNECTION_FORCED


def _put(b, path: str, body: dict) -> None:
    req = urllib.request.Request(f"http://127.0.0.1:{b.http_port}/api{path}", method="PUT",
                                 data=json.dumps(body).encode(), headers={
                                     "content-type": "application/json",
                                     "authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status in (201, 204)


def test_a_connection_with_heartbeats_stays_open_while_idle(broker):
    with Client010(broker, heartbeat=1) as c:
        s = c.session(1)
        start = time.monotonic()
        while time.monotonic() - start < 2.5:  # the broker must keep the line alive and us connected
            # ours every half second, whether or not one of the broker's came in meanwhile (sent only
            # after a quiet half second, ours were 1.5 s apart at best: near the 2 s limit under load)
            c.conn.send_heartbeat()
            c.flush()
            try:
                c.pump(time.monotonic() + 0.5)
            except TimeoutError:
                pass
        assert s.send(spec.ExchangeQuery(name="amq.topic")).type == "topic"


def test_detach_releases_unaccepted_messages_and_another_session_gets_them(client, qname):
    a = client.session(1)
    a.send(spec.QueueDeclare(queue=qname, auto_delete=False))
    a.transfer("", b"x", routing_key=qname)
    a.subscribe(qname, "d")
    a.get("d")
    client.conn.detach(1)
    client.flush()
    client.wait(ev.SessionDetached, channel=1)
    b = client.session(2)
    assert b.send(spec.QueueQuery(queue=qname)).message_count == 1
    b.subscribe(qname, "e")
    msg = b.get("e")
    assert msg.body == b"x" and msg.delivery.redelivered
    b.accept(msg.id)
    b.send(spec.QueueDelete(queue=qname))
