"""AMQP over TLS and certificate logins through real clients (pika, aio-pika, kombu).

Every test starts a private broker with certificates made on the spot (tests/e2e/tlscerts.py):
a good CA, a wrong CA (the client refuses the server; the server refuses a client certificate
from a CA it does not know), expired certificates, a plain client on the TLS port and a TLS
client on the plain port (each refused with a log line while a control client keeps working),
the SASL EXTERNAL login (CN, a SAN, the distinguished name) with its refusals, HTTPS on the
API port, and certificates reloaded on SIGHUP without dropping connections.
"""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import aio_pika
import kombu
import pika
import pytest
import trustme
from pika.exceptions import (
    AMQPConnectionError, ChannelClosedByBroker, ProbableAccessDeniedError, ProbableAuthenticationError,
)

from tests.e2e.rawamqp import (
    CONNECTION_START, CONNECTION_START_OK, PROTOCOL_HEADER, RawConnection, longstr, method_frame, shortstr, table,
)
from tests.e2e.tlscerts import SERVER_NAME, Pki

# what a refused TLS handshake raises in pika: its own error, or the ssl module's as it is
CONNECT_ERRORS = (AMQPConnectionError, ssl.SSLError, OSError)
from warren.access import AccessControl

LOGIN_REFUSED_EXTERNAL = ("ACCESS_REFUSED - Login was refused using authentication mechanism EXTERNAL. "
                          "For details see the broker logfile.")


@pytest.fixture
def pki(tmp_path) -> Pki:
    return Pki(tmp_path / "pki")


def wait_log(broker, text: str, timeout: float = 10.0, count: int = 1) -> str:
    """The broker's log once it holds ``text`` ``count`` times (log lines may trail the event a little)."""
    deadline = time.monotonic() + timeout
    while True:
        log = broker.log()
        if log.count(text) >= count:
            return log
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not in the broker log:\n{log[-3000:]}")
        time.sleep(0.05)


def params(broker, ctx: ssl.SSLContext, credentials=None, port: int | None = None, vhost: str = "/"):
    return pika.ConnectionParameters(
        "127.0.0.1", port or broker.tls_port, vhost, credentials or pika.PlainCredentials("guest", "guest"),
        ssl_options=pika.SSLOptions(ctx, SERVER_NAME), connection_attempts=1, socket_timeout=10, stack_timeout=15)


def kombu_ssl(pki: Pki, client=None) -> dict:
    """py-amqp's TLS options (a dict for its own wrap_socket; it takes no SSLContext)."""
    opts = {"ca_certs": str(pki.ca_file), "cert_reqs": ssl.CERT_REQUIRED, "server_hostname": SERVER_NAME}
    if client is not None:
        opts.update(certfile=str(client.cert), keyfile=str(client.key))
    return opts


def round_trip(conn: pika.BlockingConnection, prefix: str = "tls") -> None:
    """Declare a queue, publish with confirms, get the message back: the connection works."""
    ch = conn.channel()
    ch.confirm_delivery()
    q = ch.queue_declare(f"{prefix}-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
    body = uuid.uuid4().bytes
    ch.basic_publish("", q, body, mandatory=True)
    got = ch.basic_get(q, auto_ack=True)
    assert got[2] == body
    ch.close()


def add_user(broker, name: str, password: str | None = None, pattern: str | None = None) -> None:
    """A user in the broker's access store, with permissions on "/" (the broker re-reads the
    store within a second or so; ``connect_when_ready`` waits for that)."""
    access = AccessControl.in_data_dir(broker.data_dir)
    access.put_user(name, password)
    p = pattern or ".*"
    access.set_permissions(name, "/", p, p, p)


def connect_when_ready(parameters, timeout: float = 10.0) -> pika.BlockingConnection:
    """Connect, retrying a refused login while the broker has not yet re-read its user store,
    and a refused vhost (530) when it re-read it between ``add_user``'s two writes: the user,
    then the permissions."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return pika.BlockingConnection(parameters)
        except (ProbableAuthenticationError, ProbableAccessDeniedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def api_connections(broker) -> list[dict]:
    """``GET /api/connections``: every connection past its open-ok (in queues mode, every worker's)."""
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request(f"http://127.0.0.1:{broker.http_port}/api/connections",
                                 headers={"Authorization": auth})
    return json.load(urllib.request.urlopen(req, timeout=10))


# --- TLS listeners ----------------------------------------------------------------------------


def test_pika_over_tls_beside_plain_amqp(start_broker, pki):
    b = start_broker(*pki.broker_args("none"))
    assert b.tls_port and b.port and b.tls_port != b.port
    with pika.BlockingConnection(params(b, pki.client_context())) as c:
        round_trip(c)
        ssl_sock = c._impl._transport._sock  # the client's view of the session
        assert ssl_sock.version() in ("TLSv1.2", "TLSv1.3")
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port)) as plain:  # unchanged
            round_trip(plain)
            # the HTTP API tells them apart: RabbitMQ's ssl columns
            rows = {r["peer_port"]: r for r in api_connections(b)}
            tls_row = rows[ssl_sock.getsockname()[1]]
            assert (tls_row["ssl"], tls_row["ssl_protocol"]) == (True, ssl_sock.version().lower())
            assert tls_row["ssl_cipher"] == ssl_sock.cipher()[0]
            plain_row = rows[plain._impl._transport._sock.getsockname()[1]]
            assert (plain_row["ssl"], plain_row["ssl_protocol"], plain_row["ssl_cipher"]) == (False, None, None)
    wait_log(b, "listening for AMQP over TLS")


def test_tls_only_with_port_minus_one_and_the_asyncio_loop(start_broker, pki):
    b = start_broker(*pki.broker_args("none"), "--port", "-1", "--loop", "asyncio")
    assert b.port is None and b.tls_port
    with pika.BlockingConnection(params(b, pki.client_context())) as c:
        round_trip(c)


async def test_aio_pika_over_tls_with_a_client_certificate(start_broker, pki):
    b = start_broker(*pki.broker_args("require"))
    ctx = pki.client_context(pki.client("aio-client"))
    conn = await aio_pika.connect(f"amqps://guest:guest@127.0.0.1:{b.tls_port}/", ssl_context=ctx, timeout=15)
    async with conn:
        ch = await conn.channel(publisher_confirms=True)
        q = await ch.declare_queue(f"tls-aio-{uuid.uuid4().hex[:8]}", exclusive=True)
        await ch.default_exchange.publish(aio_pika.Message(b"over tls"), routing_key=q.name)
        msg = await q.get(timeout=5)
        assert msg.body == b"over tls"
        await msg.ack()


def test_kombu_over_tls(start_broker, pki):
    b = start_broker(*pki.broker_args("peer"))
    with kombu.Connection(f"amqp://guest:guest@127.0.0.1:{b.tls_port}//", connect_timeout=10,
                          ssl=kombu_ssl(pki, pki.client("kombu-client"))) as conn:
        q = kombu.Queue(f"tls-kombu-{uuid.uuid4().hex[:8]}", exclusive=True)
        with conn.Producer() as producer:
            producer.publish({"n": 1}, routing_key=q.name, declare=[q], serializer="json")
        simple = conn.SimpleQueue(q)
        msg = simple.get(timeout=5)
        assert msg.payload == {"n": 1}
        msg.ack()
        simple.close()


def test_the_client_refuses_a_server_certificate_from_another_ca(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("none"))
    other = Pki(tmp_path / "other")
    with pytest.raises(CONNECT_ERRORS) as e:
        pika.BlockingConnection(params(b, other.client_context()))
    assert "CERTIFICATE_VERIFY_FAILED" in repr(e.value) or "certificate verify failed" in repr(e.value)
    wait_log(b, "does it trust the CA of our certificate?")
    with pika.BlockingConnection(params(b, pki.client_context())) as c:  # the right CA still works
        round_trip(c)


def test_the_server_refuses_a_client_certificate_from_an_unknown_ca(start_broker, pki):
    b = start_broker(*pki.broker_args("require"))
    stranger = trustme.CA(organization_name="Not the broker's CA")
    cert = pki.client("mallory", ca=stranger)
    with pytest.raises(CONNECT_ERRORS):
        with pika.BlockingConnection(params(b, pki.client_context(cert))) as c:
            round_trip(c)  # TLS 1.3: the refusal can arrive after the client's side of the handshake
    wait_log(b, "client certificate refused: unable to get local issuer certificate")


def test_require_refuses_a_client_without_a_certificate_and_peer_lets_it_in(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("require"))
    with pytest.raises(CONNECT_ERRORS):
        with pika.BlockingConnection(params(b, pki.client_context())) as c:
            round_trip(c)
    wait_log(b, "the client sent no certificate, and tls-verify is require")
    b2 = start_broker(*pki.broker_args("peer"), data_dir=tmp_path / "d2")
    with pika.BlockingConnection(params(b2, pki.client_context())) as c:
        round_trip(c)


def test_expired_certificates_are_refused_on_both_sides(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("require"))
    with pytest.raises(CONNECT_ERRORS):
        with pika.BlockingConnection(params(b, pki.client_context(pki.client("old", expired=True)))) as c:
            round_trip(c)
    wait_log(b, "client certificate refused: certificate has expired")
    stale = Pki(tmp_path / "stale", server_expired=True)
    b2 = start_broker(*stale.broker_args("none"), data_dir=tmp_path / "d2")
    with pytest.raises(CONNECT_ERRORS) as e:
        pika.BlockingConnection(params(b2, stale.client_context()))
    assert "certificate has expired" in repr(e.value)


def test_a_plain_client_on_the_tls_port_is_closed_and_logged_and_nobody_else_notices(start_broker, pki):
    b = start_broker(*pki.broker_args("none"))
    with pika.BlockingConnection(params(b, pki.client_context())) as control:
        ch = control.channel()
        q = ch.queue_declare(f"tls-control-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
        with socket.create_connection(("127.0.0.1", b.tls_port), timeout=5) as s:
            s.sendall(PROTOCOL_HEADER)
            s.settimeout(5)
            got = b""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:  # at most a TLS alert, then the end of the stream
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            else:
                raise AssertionError("the broker kept a plain client on its TLS port")
            assert not got.startswith(b"AMQP")
        with pytest.raises(AMQPConnectionError):  # pika without TLS on the TLS port
            pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.tls_port, connection_attempts=1,
                                                              socket_timeout=5, stack_timeout=10))
        log = wait_log(b, "a plain AMQP or HTTP client on the TLS port?")
        assert "Traceback" not in log
        ch.basic_publish("", q, b"still here")  # the control connection was not disturbed
        assert ch.basic_get(q, auto_ack=True)[2] == b"still here"
    with pika.BlockingConnection(params(b, pki.client_context())) as c:
        round_trip(c)


def test_a_tls_client_on_the_plain_port_is_refused_with_a_hint(start_broker, pki):
    b = start_broker(*pki.broker_args("none"))
    with pytest.raises(CONNECT_ERRORS):
        pika.BlockingConnection(params(b, pki.client_context(), port=b.port))
    wait_log(b, "a TLS client on the plain AMQP port")
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port)) as c:
        round_trip(c)


def test_tls_versions_setting_narrows_what_is_accepted(start_broker, pki):
    b = start_broker(*pki.broker_args("none", "--tls-versions", "tlsv1.3"))
    ctx12 = pki.client_context()
    ctx12.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(CONNECT_ERRORS):
        pika.BlockingConnection(params(b, ctx12))
    wait_log(b, "TLS handshake with 127.0.0.1")
    with pika.BlockingConnection(params(b, pki.client_context())) as c:
        assert c._impl._transport._sock.version() == "TLSv1.3"


@pytest.mark.parametrize("mode", ["vhosts", "queues"])
def test_tls_with_workers_ends_in_the_supervisor_and_is_relayed_to_a_worker(start_broker, pki, tmp_path, mode):
    """--workers: the supervisor ends TLS and relays the plaintext (warren/server/relay.py).
    Password and certificate logins work, a message larger than every socket buffer crosses
    both ways, the HTTP API shows the client's address and the TLS session, and a stop reaches
    the client as its worker's connection.close."""
    b = start_broker("--workers", "2", "--worker-mode", mode, *pki.broker_args("peer"), data_dir=tmp_path / mode)
    user = f"cert-{uuid.uuid4().hex[:8]}"
    add_user(b, user, None)
    with pika.BlockingConnection(params(b, pki.client_context())) as c:
        round_trip(c)
        ch = c.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        big = uuid.uuid4().bytes * (256 * 1024)  # 4 MiB: the relay pauses and resumes on the way
        ch.basic_publish("", q, big)
        got = None
        for _ in range(100):
            got = ch.basic_get(q, auto_ack=True)[2]
            if got is not None:
                break
            time.sleep(0.05)
        assert got == big
    with connect_when_ready(params(b, pki.client_context(pki.client(user)), pika.credentials.ExternalCredentials())) as c:
        round_trip(c, prefix="cert")
        port = c._impl._transport._sock.getsockname()[1]
        rows = [r for r in api_connections(b) if r["peer_port"] == port]
        assert len(rows) == 1, "the relayed connection is listed under the client's address"
        row = rows[0]
        assert (row["peer_host"], row["port"], row["user"], row["auth_mechanism"]) == ("127.0.0.1", b.tls_port, user,
                                                                                       "EXTERNAL")
        assert row["ssl"] is True and row["ssl_protocol"] in ("tlsv1.2", "tlsv1.3") and row["ssl_cipher"]
    # a stop: the worker closes its connections (320), and the relay carries that to the client
    c = pika.BlockingConnection(params(b, pki.client_context()))
    c.channel()
    b.signal(signal.SIGTERM)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as e:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            c.process_data_events(time_limit=0.1)
    assert e.value.reply_code == 320
    assert b.wait() == 0


def test_bad_tls_files_stop_the_start_with_one_line(tmp_path, pki):
    other = Pki(tmp_path / "other")
    r = subprocess.run([sys.executable, "-m", "warren", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
                        "--http-port", "-1", "--tls-port", "0", "--tls-cert", str(pki.server_cert),
                        "--tls-key", str(other.server_key)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "cannot load TLS certificate" in r.stderr and "Traceback" not in r.stderr


# --- certificates reloaded on SIGHUP ----------------------------------------------------------


def test_sighup_reloads_the_certificate_and_open_connections_stay(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("none"))
    old = pika.BlockingConnection(params(b, pki.client_context()))
    try:
        ch = old.channel()
        q = ch.queue_declare(f"tls-reload-{uuid.uuid4().hex[:8]}", exclusive=True).method.queue
        new_ca = trustme.CA(organization_name="Warren test CA, renewed")
        new_ca_file = tmp_path / "new-ca.pem"
        new_ca.cert_pem.write_to_path(str(new_ca_file))
        pki.write_server_cert(ca=new_ca)
        b.signal(signal.SIGHUP)
        wait_log(b, "TLS certificates reloaded (SIGHUP)")
        # new connections get the new certificate: only the new CA's clients accept it
        with pika.BlockingConnection(params(b, pki.client_context(cafile=new_ca_file))) as c:
            round_trip(c)
        with pytest.raises(CONNECT_ERRORS):
            pika.BlockingConnection(params(b, pki.client_context()))
        # the connection opened before the reload kept its session and still works
        ch.basic_publish("", q, b"after reload")
        assert ch.basic_get(q, auto_ack=True)[2] == b"after reload"
        # a reload that cannot read the files keeps the current certificate
        pki.server_key.write_text("not a key")
        b.signal(signal.SIGHUP)
        wait_log(b, "TLS certificates NOT reloaded (SIGHUP)")
        with pika.BlockingConnection(params(b, pki.client_context(cafile=new_ca_file))) as c:
            round_trip(c)
    finally:
        old.close()
    assert b.proc.poll() is None


# --- HTTPS on the API port ----------------------------------------------------------------------


def _get(url: str, ctx: ssl.SSLContext | None, path: str = "/api/overview"):
    req = urllib.request.Request(url + path)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return r.status, json.loads(r.read())


def test_https_api_with_the_ca_and_reloaded_on_sighup(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("none", "--http-tls"))
    url = f"https://{SERVER_NAME}:{b.http_port}"
    status, body = _get(url, pki.client_context())
    assert status == 200
    listeners = {(x["protocol"], x["port"]) for x in body["listeners"]}
    assert {("amqp", b.port), ("amqp/ssl", b.tls_port), ("https", b.http_port)} <= listeners
    assert _get(url, pki.client_context(), "/api/health/checks/protocol-listener/amqps")[1]["status"] == "ok"
    with pytest.raises(urllib.error.URLError):  # a client that does not trust our CA
        _get(url, ssl.create_default_context())
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):  # plain HTTP on the HTTPS port
        _get(f"http://127.0.0.1:{b.http_port}", None)
    new_ca = trustme.CA(organization_name="Warren test CA, renewed")
    new_ca_file = tmp_path / "new-ca.pem"
    new_ca.cert_pem.write_to_path(str(new_ca_file))
    pki.write_server_cert(ca=new_ca)
    b.signal(signal.SIGHUP)
    # with --workers, the supervisor (AMQP over TLS) and then each worker (its HTTPS API) reload
    wait_log(b, "TLS certificates reloaded (SIGHUP)", count=1 + len(b.workers))
    assert _get(url, pki.client_context(cafile=new_ca_file))[0] == 200
    with pytest.raises(urllib.error.URLError):
        _get(url, pki.client_context())


def test_https_on_the_prometheus_port_and_with_workers(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("none", "--http-tls", "--prometheus-port", "0"))
    ready = json.loads(Path(b.args[b.args.index("--ready-file") + 1]).read_text())
    with urllib.request.urlopen(f"https://{SERVER_NAME}:{ready['prometheus_port']}/metrics", timeout=10,
                                context=pki.client_context()) as r:
        assert r.status == 200 and b"rabbitmq_" in r.read()
    # --workers: each worker's HTTP port is HTTPS
    w = start_broker("--workers", "2", "--http-tls", "--tls-cert", str(pki.server_cert), "--tls-key",
                     str(pki.server_key), data_dir=tmp_path / "d2")
    assert w.tls_port is None
    assert _get(f"https://{SERVER_NAME}:{w.http_port}", pki.client_context())[0] == 200
    with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", w.port)) as c:
        round_trip(c)


# --- certificate login (SASL EXTERNAL) ----------------------------------------------------------


def test_pika_certificate_login_by_common_name_with_permissions_enforced(start_broker, pki):
    b = start_broker(*pki.broker_args("require"))
    user = f"cert-{uuid.uuid4().hex[:8]}"
    add_user(b, user, None, pattern=r"^(cert-.*|amq\.default)$")  # passwordless: its only way in
    ctx = pki.client_context(pki.client(user))
    with connect_when_ready(params(b, ctx, pika.credentials.ExternalCredentials())) as c:
        round_trip(c, prefix="cert")
        ch = c.channel()
        with pytest.raises(ChannelClosedByBroker) as e:  # normal vhost permissions apply
            ch.queue_declare(f"other-{uuid.uuid4().hex[:8]}")
        assert e.value.reply_code == 403
    wait_log(b, f"user={user} vhost=/ opened")
    # the same passwordless user cannot log in by password, even over TLS with the certificate
    with pytest.raises(ProbableAuthenticationError):
        pika.BlockingConnection(params(b, ctx, pika.PlainCredentials(user, "")))


def test_aio_pika_and_kombu_certificate_logins(start_broker, pki):
    b = start_broker(*pki.broker_args("require"))
    user = f"cert-{uuid.uuid4().hex[:8]}"
    add_user(b, user, None)
    client = pki.client(user)
    ctx = pki.client_context(client)
    connect_when_ready(params(b, ctx, pika.credentials.ExternalCredentials())).close()  # the store was re-read

    async def aio() -> bytes:
        conn = await aio_pika.connect(f"amqps://127.0.0.1:{b.tls_port}/?auth=external", ssl_context=ctx, timeout=15)
        async with conn:
            ch = await conn.channel()
            q = await ch.declare_queue(f"cert-aio-{uuid.uuid4().hex[:8]}", exclusive=True)
            await ch.default_exchange.publish(aio_pika.Message(b"aio"), routing_key=q.name)
            return (await q.get(timeout=5)).body
    assert asyncio.run(aio()) == b"aio"

    with kombu.Connection(f"amqp://127.0.0.1:{b.tls_port}//", ssl=kombu_ssl(pki, client), login_method="EXTERNAL",
                          connect_timeout=10) as conn:
        simple = conn.SimpleQueue(f"cert-kombu-{uuid.uuid4().hex[:8]}")
        simple.put({"via": "kombu"})
        msg = simple.get(timeout=5)
        assert msg.payload == {"via": "kombu"}
        msg.ack()
        simple.close()


def test_certificate_login_from_a_san_and_from_the_distinguished_name(start_broker, pki, tmp_path):
    email = f"cert-{uuid.uuid4().hex[:8]}@example.test"
    b = start_broker(*pki.broker_args("require", "--tls-login-from", "subject_alternative_name",
                                      "--tls-login-san-type", "email"))
    add_user(b, email, None)
    ctx = pki.client_context(pki.client("ignored-cn", "first.example.test", email))
    with connect_when_ready(params(b, ctx, pika.credentials.ExternalCredentials())) as c:
        round_trip(c)
    wait_log(b, f"user={email} vhost=/ opened")

    cn = f"cert-{uuid.uuid4().hex[:8]}"
    b2 = start_broker(*pki.broker_args("require", "--tls-login-from", "distinguished_name"), data_dir=tmp_path / "d2")
    # the subject is O, OU, CN in the certificate; RFC 4514 prints it the other way round, escaped
    dn = f"CN={cn},OU=Clients,O=Warren\\, Tests"
    add_user(b2, dn, None)
    ctx2 = pki.client_context(pki.client(cn, organization="Warren, Tests", unit="Clients"))
    with connect_when_ready(params(b2, ctx2, pika.credentials.ExternalCredentials())) as c:
        round_trip(c)


def test_certificate_login_refusals(start_broker, pki):
    b = start_broker(*pki.broker_args("peer"))
    # an unknown user: RabbitMQ's generic refusal; the reason in the log only
    stranger = f"cert-nobody-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ProbableAuthenticationError) as e:
        pika.BlockingConnection(params(b, pki.client_context(pki.client(stranger)),
                                       pika.credentials.ExternalCredentials()))
    assert LOGIN_REFUSED_EXTERNAL in str(e.value)
    wait_log(b, f"certificate login refused for user '{stranger}': unknown user")
    # no client certificate (tls-verify peer lets the client in): EXTERNAL is not offered
    with pytest.raises(AMQPConnectionError):
        pika.BlockingConnection(params(b, pki.client_context(), pika.credentials.ExternalCredentials()))
    # the mechanisms each kind of connection is offered, and EXTERNAL forced on a plain one
    with RawConnection("127.0.0.1", b.port) as raw:
        raw.send(PROTOCOL_HEADER)
        assert b"EXTERNAL" not in raw.expect(CONNECTION_START).args
        props = {"product": "raw", "capabilities": {"authentication_failure_close": True}}
        raw.send(method_frame(0, *CONNECTION_START_OK, table(props) + shortstr("EXTERNAL") + longstr(b"")
                              + shortstr("en_US")))
        close = raw.expect_connection_close()
        assert close.reply_code == 403 and "EXTERNAL" in close.reply_text
    wait_log(b, "EXTERNAL login without a verified client certificate")
    for cert, offered in ((None, False), (pki.client("someone"), True)):
        with socket.create_connection(("127.0.0.1", b.tls_port), timeout=5) as s:
            with pki.client_context(cert).wrap_socket(s, server_hostname=SERVER_NAME) as tls:
                tls.sendall(PROTOCOL_HEADER)
                start = _read_some(tls)
                assert (b"EXTERNAL" in start) is offered
                assert b"PLAIN" in start


def _read_some(sock, size: int = 600, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while len(data) < 64 or (b"en_US" not in data and time.monotonic() < deadline):
        chunk = sock.recv(size)
        if not chunk:
            break
        data += chunk
    return data


def test_stream_records_over_https_are_read_and_written_not_sendfile(start_broker, pki):
    """The kernel's sendfile cannot encrypt: over HTTPS a segment file's part is read and
    written as any body (warren/http/sendfile.py), and comes back whole."""
    from warren.store.message import decode_message
    from warren.store.stream_format import parse_entries
    b = start_broker(*pki.broker_args("none", "--http-tls"))
    name = f"tls-stream-{uuid.uuid4().hex[:8]}"
    bodies = [b"%05d" % i + bytes([i % 251]) * 4000 for i in range(1000)]  # 4 MB: past the 1 MiB tail cache
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", b.port))
    try:
        ch = conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        ch.confirm_delivery()
        for body in bodies:
            ch.basic_publish("", name, body)
    finally:
        conn.close()
    got, offset = [], 0
    for _ in range(100):  # bounded: a few pages of 2 MiB
        req = urllib.request.Request(f"https://{SERVER_NAME}:{b.http_port}/api/streams/%2F/{name}/records"
                                     f"?offset={offset}&max_bytes={2 << 20}")
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        with urllib.request.urlopen(req, timeout=10, context=pki.client_context()) as r:
            count, body = int(r.headers["X-Warren-Record-Count"]), r.read()
        if not count:
            break
        got += [decode_message(record)[3] for _, _, record in parse_entries(body)]
        offset = int(r.headers["X-Warren-Next-Offset"])
    assert got == bodies
