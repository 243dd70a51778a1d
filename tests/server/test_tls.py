"""warren/server/tls.py: contexts from the settings, their reload, the user name a client
certificate gives, the mechanisms offered, and the listener's log line for each kind of failed
handshake (real sockets on 127.0.0.1, in-process)."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import replace

import pytest

from tests.e2e.tlscerts import SERVER_NAME, Pki
from warren.config import Config
from warren.server.tls import (
    TlsAmqpListener, TlsContexts, TlsError, build_context, distinguished_name, login_name, session_of,
)


@pytest.fixture
def pki(tmp_path) -> Pki:
    return Pki(tmp_path / "pki")


def tls_config(pki: Pki, **kw) -> Config:
    base = Config(tls_port=0, tls_cert=pki.server_cert, tls_key=pki.server_key, tls_ca=pki.ca_file,
                  tls_verify="require", http_port=-1)
    return replace(base, **kw).validate()


# --- settings -----------------------------------------------------------------------------------


# the accepted versions themselves: tests/test_config.py


def test_config_checks_the_tls_settings(pki):
    ok = tls_config(pki)
    assert ok.tls_versions == ("tlsv1.2", "tlsv1.3")
    assert tls_config(pki, tls_versions="tlsv1.3").tls_versions == ("tlsv1.3",)  # the command line's form
    cases = {
        "tls-cert": dict(tls_cert=None),
        "needs tls-ca": dict(tls_ca=None),
        "tls-verify must be": dict(tls_verify="optional"),
        "may hold only": dict(tls_versions=("tlsv1.1",)),
        "tls-login-from must be": dict(tls_login_from="cn"),
        "tls-login-san-type must be": dict(tls_login_san_type="dirname"),
        "no AMQP listener": dict(port=-1, tls_port=-1),
    }
    for text, change in cases.items():
        with pytest.raises(ValueError, match=text):
            tls_config(pki, **change)
    assert tls_config(pki, port=-1).port == -1  # TLS only
    assert tls_config(pki, workers=2).workers == 2  # the supervisor ends TLS (warren/server/relay.py)


def test_contexts_follow_the_settings(pki):
    amqp = build_context(tls_config(pki, tls_verify="peer", tls_ciphers="ECDHE+AESGCM"))
    assert amqp.minimum_version == ssl.TLSVersion.TLSv1_2 and amqp.maximum_version == ssl.TLSVersion.TLSv1_3
    assert amqp.verify_mode == ssl.CERT_OPTIONAL
    assert all("GCM" in c["name"] or c["protocol"] == "TLSv1.3" for c in amqp.get_ciphers())
    assert build_context(tls_config(pki)).verify_mode == ssl.CERT_REQUIRED
    assert build_context(tls_config(pki, tls_verify="none", tls_ca=None)).verify_mode == ssl.CERT_NONE
    http = build_context(tls_config(pki), client_certificates=False)  # HTTPS never asks for one
    assert http.verify_mode == ssl.CERT_NONE


def test_unusable_files_are_one_clear_error(pki, tmp_path):
    other = Pki(tmp_path / "other")
    with pytest.raises(TlsError, match="not found"):
        build_context(tls_config(pki, tls_cert=tmp_path / "missing.pem"))
    with pytest.raises(TlsError, match="cannot load TLS certificate"):
        build_context(tls_config(pki, tls_key=other.server_key))  # a key of another certificate
    with pytest.raises(TlsError, match="names no cipher"):
        build_context(tls_config(pki, tls_ciphers="NO-SUCH-CIPHER"))
    with pytest.raises(TlsError, match="CA file not found"):
        build_context(tls_config(pki, tls_ca=tmp_path / "nope.pem"))


def test_reload_swaps_contexts_and_keeps_them_when_the_files_are_bad(pki, caplog):
    contexts = TlsContexts(tls_config(pki, http_tls=True))
    first_amqp, first_http, front = contexts.amqp, contexts.http, contexts.http_server_context()
    assert front is first_http
    assert contexts.reload()
    assert contexts.amqp is not first_amqp and contexts.http is not first_http
    assert contexts.http_server_context() is front  # the listener's context never changes
    current = contexts.amqp
    pki.server_key.write_text("garbage")
    with caplog.at_level(logging.ERROR, logger="warren.tls"):
        assert not contexts.reload()
    assert contexts.amqp is current
    assert "NOT reloaded" in caplog.text


# --- the user name from a certificate -----------------------------------------------------------


CERT = {
    "subject": ((("countryName", "GB"),), (("organizationName", "Warren, Ltd"),),
                (("organizationalUnitName", "ops"),), (("commonName", "alice"),)),
    "subjectAltName": (("DNS", "a.example"), ("email", "alice@example.com"), ("DNS", "b.example"),
                       ("URI", "spiffe://example/alice"), ("IP Address", "10.0.0.1")),
}


def test_login_name_as_rabbitmq_ssl_cert_login_from_says():
    assert login_name(CERT).name == "alice"
    assert login_name(CERT, "distinguished_name").name == "CN=alice,OU=ops,O=Warren\\, Ltd,C=GB"
    assert login_name(CERT, "subject_alternative_name", "dns", 1).name == "b.example"
    assert login_name(CERT, "subject_alt_name", "email").name == "alice@example.com"
    assert login_name(CERT, "subject_alternative_name", "uri").name == "spiffe://example/alice"
    assert login_name(CERT, "subject_alternative_name", "ip").name == "10.0.0.1"
    missing = login_name(CERT, "subject_alternative_name", "dns", 2)
    assert missing.name is None and "none at index 2" in missing.error
    assert login_name({"subject": ((("organizationName", "x"),),)}).error.startswith("the client certificate has no common name")
    two_cns = {"subject": ((("commonName", "a"),), (("commonName", "b"),))}
    assert login_name(two_cns).name == "a,b"


def test_distinguished_name_escapes_as_rfc_4514():
    subject = ((("commonName", " lead+trail "),), (("organizationName", '#"q";<x>'),),
               (("domainComponent", "com"), ("userId", "u1")))
    assert distinguished_name(subject) == 'DC=com+UID=u1,O=\\#\\"q\\"\\;\\<x\\>,CN=\\ lead\\+trail\\ '


# --- the listener, in-process -------------------------------------------------------------------


class _Recorder(asyncio.Protocol):
    """Stands for the AMQP connection: records what it is given."""

    made: list = []

    def connection_made(self, transport) -> None:
        self.transport = transport
        _Recorder.made.append(transport)

    def data_received(self, data: bytes) -> None:
        self.transport.write(b"echo:" + data)


async def _serve(config: Config):
    contexts = TlsContexts(config)
    listener = TlsAmqpListener(asyncio.get_running_loop(), contexts, _Recorder, handshake_timeout=2.0)
    port = await listener.start("127.0.0.1", 0)
    return contexts, listener, port


def _client(port: int, ctx: ssl.SSLContext, send: bytes = b"AMQP\x00\x00\x09\x01") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=SERVER_NAME) as s:
            s.sendall(send)
            return s.recv(100)


async def test_listener_hands_tls_connections_over_and_logs_each_failed_handshake(pki, caplog):
    _Recorder.made = []
    contexts, listener, port = await _serve(tls_config(pki, tls_verify="peer"))
    loop = asyncio.get_running_loop()
    try:
        # a TLS client: its bytes reach the connection, which sees the certificate it sent
        client = pki.client("carol")
        got = await loop.run_in_executor(None, _client, port, pki.client_context(client))
        assert got == b"echo:AMQP\x00\x00\x09\x01"
        session = session_of(_Recorder.made[-1], contexts.config)
        assert session.mechanisms.endswith(b"EXTERNAL") and session.login.name == "carol"
        # without a certificate: no EXTERNAL
        await loop.run_in_executor(None, _client, port, pki.client_context())
        session = session_of(_Recorder.made[-1], contexts.config)
        assert b"EXTERNAL" not in session.mechanisms and session.login is None

        def plain() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"AMQP\x00\x00\x09\x01")
                return s.recv(100)

        def old_client() -> None:
            ctx = pki.client_context()
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            with pytest.raises(ssl.SSLError):
                _client(port, ctx)

        with caplog.at_level(logging.WARNING, logger="warren.tls"):
            assert not (await loop.run_in_executor(None, plain)).startswith(b"AMQP")
            contexts.amqp.minimum_version = ssl.TLSVersion.TLSv1_3  # as --tls-versions tlsv1.3
            await loop.run_in_executor(None, old_client)
            deadline = loop.time() + 5
            while caplog.text.count("TLS handshake with 127.0.0.1") < 2 and loop.time() < deadline:
                await asyncio.sleep(0.05)
        assert "a plain AMQP or HTTP client on the TLS port?" in caplog.text
        assert "offers no TLS version allowed here" in caplog.text
        assert len(_Recorder.made) == 2  # the failed ones never reached a connection
    finally:
        listener.close()
        await listener.wait_closed()


async def test_closing_the_listener_aborts_handshakes_in_progress(pki):
    contexts, listener, port = await _serve(tls_config(pki))
    loop = asyncio.get_running_loop()
    silent = await loop.run_in_executor(None, socket.create_connection, ("127.0.0.1", port), 5)
    try:
        deadline = loop.time() + 5
        while not listener.pending and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert listener.pending  # the silent client is mid-handshake
        listener.close()
        await asyncio.wait_for(listener.wait_closed(), 5)
        assert not listener.pending
        silent.settimeout(5)
        assert await loop.run_in_executor(None, silent.recv, 10) == b""  # its socket was closed
    finally:
        silent.close()
