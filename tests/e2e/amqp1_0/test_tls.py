"""AMQP 1.0 on the TLS listener: Qpid Proton verifies the broker's certificate (our test CA) and
logs in with SASL PLAIN inside TLS; the same queues as a plain 0-9-1 client."""

from __future__ import annotations

import pika
from proton import Message, SSLDomain
from proton.utils import BlockingConnection

from tests.e2e.tlscerts import SERVER_NAME, Pki


def test_proton_over_tls_sends_and_receives(start_broker, tmp_path, qname):
    pki = Pki(tmp_path / "pki")
    b = start_broker(*pki.broker_args("none"))
    p = pika.BlockingConnection(pika.URLParameters(b.url))
    p.channel().queue_declare(qname)
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki.ca_file))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    c = BlockingConnection(f"amqps://guest:guest@{SERVER_NAME}:{b.tls_port}", timeout=10, ssl_domain=domain)
    try:
        c.create_sender(f"/queues/{qname}").send(Message(body=b"over tls", inferred=True))
        r = c.create_receiver(f"/queues/{qname}")
        assert r.receive(timeout=10).body == b"over tls"
        r.accept()
    finally:
        c.close()
    assert p.channel().queue_declare(qname, passive=True).method.message_count == 0
    p.close()


def test_proton_certificate_login_with_sasl_external(start_broker, tmp_path, qname):
    from tests.e2e.test_tls_clients import add_user, connect_when_ready, params

    pki = Pki(tmp_path / "pki")
    b = start_broker(*pki.broker_args("require"))
    user = f"cert-{qname}"
    add_user(b, user, None)  # passwordless: the certificate is its only way in
    client = pki.client(user)
    connect_when_ready(params(b, pki.client_context(client), pika.credentials.ExternalCredentials())).close()
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(pki.ca_file))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    domain.set_credentials(str(client.cert), str(client.key), None)
    c = BlockingConnection(f"amqps://{SERVER_NAME}:{b.tls_port}", timeout=10, ssl_domain=domain,
                           allowed_mechs="EXTERNAL")
    try:
        c.create_sender(None)
    finally:
        c.close()
    assert any(f"user={user} vhost=/ (AMQP 1.0) opened" in line for line in b.log().splitlines())
