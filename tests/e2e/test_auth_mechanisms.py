"""``auth_mechanisms`` through real clients over real sockets (issue 36's EXTERNAL offer): the
mechanisms connection.start and 1.0's sasl-mechanisms carry, exactly, on plain and TLS
connections; pika's certificate login where EXTERNAL is offered and its refusal where it is not;
Qpid Proton (which picks EXTERNAL whenever it is offered and it has a certificate) logging in
with PLAIN once the list leaves EXTERNAL out; a mechanism not offered refused; an unknown name
stopping the start with one line. The list comes from warren.toml and from the environment, as
every option can (warren/config_sources.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pika
import pytest
from pika.exceptions import AMQPConnectionError
from proton import SSLDomain
from proton.utils import BlockingConnection

from tests.conftest import EXTERNAL_URL
from tests.e2e.amqp1_0.raw10 import SASL_HEADER, Raw10
from tests.e2e.rawamqp import (
    CONNECTION_START, CONNECTION_START_OK, PROTOCOL_HEADER, RawConnection, Reader, longstr, method_frame, shortstr,
    table,
)
from tests.e2e.test_tls_clients import add_user, connect_when_ready, params, round_trip, wait_log
from tests.e2e.tlscerts import SERVER_NAME, Pki
from warren.spec import amqp1_0 as spec

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="starts its own brokers")

LOGIN_REFUSED = "ACCESS_REFUSED - Login was refused using authentication mechanism {}."
# an AMQPLAIN response: a field table's entries without the table's length
GUEST_AMQPLAIN = table({"LOGIN": "guest", "PASSWORD": "guest"})[4:]


@pytest.fixture
def pki(tmp_path) -> Pki:
    return Pki(tmp_path / "pki")


def toml_with(tmp_path, mechanisms: list[str]) -> list[str]:
    """``warren serve`` options reading ``auth_mechanisms`` from a warren.toml."""
    path = tmp_path / f"warren-{uuid.uuid4().hex[:6]}.toml"
    path.write_text("auth_mechanisms = [" + ", ".join(f'"{m}"' for m in mechanisms) + "]\n")
    return ["--config", str(path)]


def start_0_9_1_mechanisms(broker, ctx=None) -> bytes:
    """The exact mechanisms longstr of connection.start, on the plain port or (``ctx``) over TLS."""
    with RawConnection("127.0.0.1", broker.tls_port if ctx else broker.port) as raw:
        if ctx is not None:
            raw.sock = ctx.wrap_socket(raw.sock, server_hostname=SERVER_NAME)
        raw.send(PROTOCOL_HEADER)
        r = Reader(raw.expect(CONNECTION_START, 0).args)
        r.unpack(">BB")
        r.table()
        return r.longstr()


def refused_start_ok(broker, mechanism: str, response: bytes, ctx=None) -> int:
    """A raw 0-9-1 start-ok naming ``mechanism``: the reply code of the connection.close it gets."""
    with RawConnection("127.0.0.1", broker.tls_port if ctx else broker.port) as raw:
        if ctx is not None:
            raw.sock = ctx.wrap_socket(raw.sock, server_hostname=SERVER_NAME)
        raw.send(PROTOCOL_HEADER)
        raw.expect(CONNECTION_START, 0)
        props = {"product": "raw", "capabilities": {"authentication_failure_close": True}}
        raw.send(method_frame(0, *CONNECTION_START_OK, table(props) + shortstr(mechanism) + longstr(response)
                              + shortstr("en_US")))
        close = raw.expect_connection_close()
        assert close.reply_text.startswith(LOGIN_REFUSED.format(mechanism)), close
        return close.reply_code


def sasl_mechanisms_1_0(broker, ctx=None) -> list[str]:
    """The mechanisms of 1.0's sasl-mechanisms frame, in order."""

    class Port:
        host, port = "127.0.0.1", broker.tls_port if ctx else broker.port

    with Raw10(Port) as raw:
        if ctx is not None:
            raw.sock = ctx.wrap_socket(raw.sock, server_hostname=SERVER_NAME)
        raw.send_raw(SASL_HEADER)
        assert raw.header() == SASL_HEADER
        offered = raw.expect(spec.SaslMechanisms).sasl_server_mechanisms
        return [str(m) for m in ([offered] if isinstance(offered, str) else offered)]


def proton_connection(broker, pki: Pki, client) -> BlockingConnection:
    """Qpid Proton with guest's password in the URL and a client certificate, as
    rabbitmq-amqp-python-client's TLS tests connect: it picks EXTERNAL whenever offered."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki.ca_file))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    domain.set_credentials(str(client.cert), str(client.key), None)
    return BlockingConnection(f"amqps://guest:guest@{SERVER_NAME}:{broker.tls_port}", timeout=10, ssl_domain=domain)


def opened_as(broker, user: str) -> int:
    return sum(f"user={user} vhost=/ (AMQP 1.0) opened" in line for line in broker.log().splitlines())


def test_the_default_offers_external_on_verified_tls_and_proton_picks_it(start_broker, pki):
    b = start_broker(*pki.broker_args("peer"))
    user = f"cert-{uuid.uuid4().hex[:8]}"
    add_user(b, user, None)
    client = pki.client(user)
    ctx = pki.client_context(client)
    assert start_0_9_1_mechanisms(b) == b"PLAIN AMQPLAIN"
    assert start_0_9_1_mechanisms(b, pki.client_context()) == b"PLAIN AMQPLAIN"  # TLS, no certificate
    assert start_0_9_1_mechanisms(b, ctx) == b"PLAIN AMQPLAIN EXTERNAL"
    assert sasl_mechanisms_1_0(b) == ["PLAIN"]
    assert sasl_mechanisms_1_0(b, ctx) == ["PLAIN", "EXTERNAL"]
    with connect_when_ready(params(b, ctx, pika.credentials.ExternalCredentials())) as c:  # pika's EXTERNAL
        round_trip(c, prefix="cert")
    c = proton_connection(b, pki, client)  # guest's password given, yet the certificate's user
    try:
        c.create_sender(None)
    finally:
        c.close()
    wait_log(b, f"user={user} vhost=/ (AMQP 1.0) opened")
    assert opened_as(b, "guest") == 0


def test_rabbitmq_3_10s_list_offers_no_external_and_proton_logs_in_with_plain(start_broker, pki, tmp_path):
    b = start_broker(*pki.broker_args("peer"), *toml_with(tmp_path, ["PLAIN", "AMQPLAIN"]))
    user = f"cert-{uuid.uuid4().hex[:8]}"
    add_user(b, user, None)
    client = pki.client(user)
    ctx = pki.client_context(client)
    assert start_0_9_1_mechanisms(b, ctx) == b"PLAIN AMQPLAIN"
    assert sasl_mechanisms_1_0(b, ctx) == ["PLAIN"]
    # pika asked for EXTERNAL finds it not offered and gives up itself; by password it logs in
    with pytest.raises(AMQPConnectionError):
        pika.BlockingConnection(params(b, ctx, pika.credentials.ExternalCredentials()))
    with pika.BlockingConnection(params(b, ctx)) as c:
        round_trip(c)
    # a start-ok naming EXTERNAL anyway, with a verified certificate: refused, the reason logged
    assert refused_start_ok(b, "EXTERNAL", b"", ctx) == 403
    wait_log(b, "mechanism EXTERNAL is not offered to this connection (offered: PLAIN AMQPLAIN; auth-mechanisms)")
    # Proton, the same certificate and guest's password: PLAIN, as guest (RabbitMQ's default answers so)
    c = proton_connection(b, pki, client)
    try:
        c.create_sender(None)
    finally:
        c.close()
    wait_log(b, "user=guest vhost=/ (AMQP 1.0) opened")
    assert opened_as(b, user) == 0


def test_the_environments_list_orders_the_offer_and_refuses_what_it_leaves_out(start_broker, pki, monkeypatch):
    monkeypatch.setenv("WARREN_AUTH_MECHANISMS", "EXTERNAL,PLAIN")
    b = start_broker(*pki.broker_args("peer"))
    monkeypatch.delenv("WARREN_AUTH_MECHANISMS")
    ctx = pki.client_context(pki.client("someone"))
    assert start_0_9_1_mechanisms(b) == b"PLAIN"
    assert start_0_9_1_mechanisms(b, ctx) == b"EXTERNAL PLAIN"
    assert sasl_mechanisms_1_0(b, ctx) == ["EXTERNAL", "PLAIN"]
    with pika.BlockingConnection(pika.URLParameters(b.url)) as c:  # pika's PLAIN
        round_trip(c)
    # AMQPLAIN with guest's good password, not offered: 403
    assert refused_start_ok(b, "AMQPLAIN", GUEST_AMQPLAIN) == 403
    wait_log(b, "mechanism AMQPLAIN is not offered to this connection (offered: PLAIN; auth-mechanisms)")


@pytest.mark.parametrize("source", ["environment", "file"])
def test_an_unknown_mechanism_stops_the_start_with_one_line(tmp_path, source):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WARREN_")}
    args = [sys.executable, "-m", "warren", "serve", "--port", "0", "--http-port", "-1", "--data-dir",
            str(tmp_path / "data")]
    if source == "environment":
        env["WARREN_AUTH_MECHANISMS"] = "PLAIN,CRAM-MD5"
    else:
        args += toml_with(tmp_path, ["PLAIN", "CRAM-MD5"])
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "auth-mechanisms: unknown mechanism 'CRAM-MD5' (known: PLAIN, AMQPLAIN, ANONYMOUS, EXTERNAL)" in lines[0]
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
