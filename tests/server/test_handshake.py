"""One constructor of the protocol cores for the single-process server and the workers'
supervisor (warren/server/handshake.py ``protocol_connection``): what a client is offered
follows the node's settings, whichever of the two answers its handshake.

The clients' view of both is tested end to end elsewhere (tests/e2e/test_connection.py and
amqp0_10/, amqp1_0/ under tools/test and tools/test-workers); here, the settings each protocol
core is given."""

from __future__ import annotations

import dataclasses

from warren.config import Config
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.amqp0_10.connection import ServerConnection as ServerConnection0_10
from warren.protocol.amqp1_0.connection import ServerConnection as ServerConnection1_0
from warren.protocol.header import HEADER_0_10, read_header
from warren.server.handshake import default_vhost, protocol_connection

HEADER_0_9_1 = b"AMQP\x00\x00\x09\x01"
HEADER_1_0 = b"AMQP\x00\x01\x00\x00"
HEADER_1_0_SASL = b"AMQP\x03\x01\x00\x00"


class VerifiedCertificate:
    """A TLS session whose client certificate was verified (warren/server/tls.py offers EXTERNAL)."""

    mechanisms = b"EXTERNAL PLAIN AMQPLAIN"


def make(header: bytes, tls=None, **settings):
    config = dataclasses.replace(Config(), **settings)
    return protocol_connection(read_header(header), header, config, {"product": "Warren"}, tls)


def test_0_9_1_is_offered_the_nodes_limits_and_external_only_on_a_verified_certificate():
    plain = make(HEADER_0_9_1, frame_max=65536, channel_max=64, heartbeat=15)
    assert type(plain) is ServerConnection
    assert (plain.frame_max, plain.channel_max, plain.heartbeat) == (65536, 64, 15)  # connection.tune's offer
    start = b"".join(plain.data_to_send())  # connection.start
    assert b"PLAIN" in start and b"EXTERNAL" not in start
    assert b"EXTERNAL" in b"".join(make(HEADER_0_9_1, VerifiedCertificate()).data_to_send())  # connection.start


def test_0_10_gets_the_default_vhost_and_a_frame_size_within_its_16_bits():
    conn = make(HEADER_0_10, vhosts=("a", "b"), frame_max=1_048_576, anonymous_user="guest")
    assert type(conn) is ServerConnection0_10
    assert conn.default_vhost == "a" == default_vhost(dataclasses.replace(Config(), vhosts=("a", "b")))
    assert conn.frame_max == 0xFFFF
    assert "ANONYMOUS" in conn.mechanisms


def test_1_0_reads_sasl_from_the_header_and_offers_anonymous_only_when_configured():
    sasl = make(HEADER_1_0_SASL, frame_max=65536, heartbeat=20)
    assert type(sasl) is ServerConnection1_0
    assert sasl.sasl and "ANONYMOUS" not in sasl.mechanisms
    assert sasl.frame_max == 65536 and sasl.idle_timeout_ms == 20_000
    anonymous = make(HEADER_1_0, anonymous_user="guest")
    assert not anonymous.sasl and "ANONYMOUS" in anonymous.mechanisms
    assert "EXTERNAL" in make(HEADER_1_0_SASL, VerifiedCertificate()).mechanisms
