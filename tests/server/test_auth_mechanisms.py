"""``auth_mechanisms`` (RabbitMQ's setting of that name): the mechanisms every protocol's
handshake offers, in the order given, narrowed to what the connection can use
(warren/access/login.py ``mechanisms_offered``, warren/server/handshake.py); a login with a
mechanism not offered is refused; an unknown name stops the start. Real clients over real sockets:
tests/e2e/test_auth_mechanisms.py."""

from __future__ import annotations

import dataclasses

import pytest

from warren.access import AccessControl
from warren.access.login import log_in, mechanism_rows, mechanisms_offered
from warren.config import AUTH_MECHANISMS, Config
from warren.errors import ConnectionAccessRefused
from warren.protocol.header import read_header
from warren.server.tls import CertificateLogin

HEADERS = {"0-9-1": b"AMQP\x00\x00\x09\x01", "0-10": b"AMQP\x01\x01\x00\x0a", "1.0": b"AMQP\x03\x01\x00\x00",
           "1.0 without SASL": b"AMQP\x00\x01\x00\x00"}


class VerifiedCertificate:
    """A TLS session whose client certificate verified (warren/server/tls.py ``TlsSession``)."""

    mechanisms = b"PLAIN AMQPLAIN EXTERNAL"


class NoCertificate:
    mechanisms = b"PLAIN AMQPLAIN"


def offer(protocol: str, tls=None, **settings) -> tuple[str, ...]:
    """What a client of ``protocol`` is offered by a node of ``settings``, as the handshake makes it."""
    from warren.server.handshake import protocol_connection

    config = dataclasses.replace(Config(), **settings).validate()
    header = HEADERS[protocol]
    conn = protocol_connection(read_header(header), header, config, {"product": "Warren"}, tls)
    mechanisms = conn.mechanisms
    return tuple(mechanisms.decode().split()) if isinstance(mechanisms, bytes) else tuple(mechanisms)


def test_the_default_offers_what_warren_always_offered_in_the_same_order():
    assert Config().auth_mechanisms == AUTH_MECHANISMS == ("PLAIN", "AMQPLAIN", "ANONYMOUS", "EXTERNAL")
    assert offer("0-9-1") == ("PLAIN", "AMQPLAIN")
    assert offer("0-9-1", NoCertificate()) == ("PLAIN", "AMQPLAIN")
    assert offer("0-9-1", VerifiedCertificate()) == ("PLAIN", "AMQPLAIN", "EXTERNAL")
    assert offer("0-10") == ("PLAIN", "AMQPLAIN")
    assert offer("0-10", anonymous_user="guest") == ("PLAIN", "AMQPLAIN", "ANONYMOUS")
    assert offer("1.0") == ("PLAIN",)
    assert offer("1.0", VerifiedCertificate(), anonymous_user="guest") == ("PLAIN", "ANONYMOUS", "EXTERNAL")


def test_the_option_orders_and_narrows_every_protocols_offer():
    rabbitmq_3_10 = dict(auth_mechanisms=("PLAIN", "AMQPLAIN"), anonymous_user="guest")
    assert offer("0-9-1", VerifiedCertificate(), **rabbitmq_3_10) == ("PLAIN", "AMQPLAIN")
    assert offer("0-10", **rabbitmq_3_10) == ("PLAIN", "AMQPLAIN")
    assert offer("1.0", VerifiedCertificate(), **rabbitmq_3_10) == ("PLAIN",)
    reordered = dict(auth_mechanisms="external, anonymous,AMQPLAIN,PLAIN", anonymous_user="guest")  # env/CLI form
    assert offer("0-9-1", VerifiedCertificate(), **reordered) == ("EXTERNAL", "AMQPLAIN", "PLAIN")
    assert offer("0-10", **reordered) == ("ANONYMOUS", "AMQPLAIN", "PLAIN")
    assert offer("1.0", VerifiedCertificate(), **reordered) == ("EXTERNAL", "ANONYMOUS", "PLAIN")
    assert offer("1.0 without SASL", **reordered) == ("ANONYMOUS", "PLAIN")
    # nothing the connection can use: an empty offer, and no login succeeds
    assert offer("0-9-1", auth_mechanisms=("EXTERNAL",)) == ()
    assert offer("0-10", auth_mechanisms=("EXTERNAL",)) == ()


def test_an_unknown_or_empty_list_is_one_line_naming_the_known_ones():
    with pytest.raises(ValueError) as e:
        dataclasses.replace(Config(), auth_mechanisms="PLAIN,CRAM-MD5").validate()
    assert str(e.value) == ("auth-mechanisms: unknown mechanism 'CRAM-MD5' "
                            "(known: PLAIN, AMQPLAIN, ANONYMOUS, EXTERNAL)")
    with pytest.raises(ValueError, match="names no mechanism"):
        dataclasses.replace(Config(), auth_mechanisms=" , ").validate()
    assert dataclasses.replace(Config(), auth_mechanisms=("PLAIN", "plain")).validate().auth_mechanisms == ("PLAIN",)


def test_mechanisms_offered_by_protocol():
    everything = AUTH_MECHANISMS
    assert mechanisms_offered(everything, "0-9-1", verified_certificate=True, anonymous=True) == \
        ("PLAIN", "AMQPLAIN", "EXTERNAL")  # 0-9-1 knows no ANONYMOUS
    assert mechanisms_offered(everything, "0-10", verified_certificate=True, anonymous=True) == \
        ("PLAIN", "AMQPLAIN", "ANONYMOUS")  # nor 0-10 EXTERNAL
    assert mechanisms_offered(everything, "1.0", verified_certificate=False, anonymous=False) == ("PLAIN",)


def test_a_0_9_1_login_with_a_mechanism_connection_start_did_not_offer_is_refused():
    users = AccessControl()
    users.put_user("alice", "secret")
    users.put_user("carol", None)
    peer = "192.0.2.7"
    plain = b"\x00alice\x00secret"
    assert log_in(users, None, "PLAIN", plain, peer, start_offer=b"PLAIN") == "alice"
    with pytest.raises(ConnectionAccessRefused) as e:
        log_in(users, None, "PLAIN", plain, peer, start_offer=b"AMQPLAIN")
    assert e.value.reply_code == 403 and e.value.text.startswith("Login was refused using authentication mechanism PLAIN")
    assert e.value.log_detail == ("mechanism PLAIN is not offered to this connection (offered: AMQPLAIN; "
                                  "auth-mechanisms)")
    odd = str(b"PL\xffIN", "utf-8", "surrogateescape")  # a name of any octets, as start-ok's shortstr reads it
    with pytest.raises(ConnectionAccessRefused) as e:
        log_in(users, None, odd, plain, peer, start_offer=b"PLAIN")
    assert e.value.reply_code == 403 and "is not offered" in e.value.log_detail
    # a verified certificate where EXTERNAL is not offered: refused, saying so
    with pytest.raises(ConnectionAccessRefused) as e:
        log_in(users, None, "EXTERNAL", b"", peer, certificate=CertificateLogin("carol"), start_offer=b"PLAIN AMQPLAIN")
    assert e.value.log_detail.startswith("mechanism EXTERNAL is not offered")
    assert log_in(users, None, "EXTERNAL", b"", peer, certificate=CertificateLogin("carol"),
                  start_offer=b"PLAIN EXTERNAL") == "carol"
    # no certificate at all: the reason stays the one of before
    with pytest.raises(ConnectionAccessRefused) as e:
        log_in(users, None, "EXTERNAL", b"", peer, start_offer=b"PLAIN")
    assert e.value.log_detail.startswith("EXTERNAL login without a verified client certificate")


def test_sasl_anonymous_left_out_of_the_option_is_refused_even_with_an_anonymous_user():
    with pytest.raises(ConnectionAccessRefused) as e:
        log_in(AccessControl(), None, "ANONYMOUS", b"", "192.0.2.7", offered=("PLAIN",), anonymous_user="guest")
    assert e.value.log_detail == "unsupported SASL mechanism 'ANONYMOUS' (offered: PLAIN)"


def test_the_nodes_api_rows_follow_the_option():
    rows = mechanism_rows(("PLAIN", "AMQPLAIN"))
    assert [(r["name"], r["enabled"]) for r in rows] == [("PLAIN", True), ("AMQPLAIN", True), ("ANONYMOUS", False),
                                                         ("EXTERNAL", False)]
    assert rows[0]["description"] == "SASL PLAIN authentication mechanism"
    assert [r["name"] for r in mechanism_rows(("EXTERNAL", "PLAIN")) if r["enabled"]] == ["EXTERNAL", "PLAIN"]
