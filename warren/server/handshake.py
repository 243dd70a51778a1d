"""The handshake: the protocol core a header asks for, and what it must reach in time.

``protocol_connection`` makes the sans-IO connection of whichever protocol the client's header
names, with the node's settings: the single-process server (connection.py) and the workers'
supervisor (workers.py, which runs the handshake up to connection.open and then hands the
connection over) both make it here, so what a client is offered (mechanisms, frame and channel
limits, heartbeat, the default vhost) cannot differ between them. What its login and the vhost
it names are answered is one step both call too: ``warren/access/login.py``.

The handshake time limit: what a connection must reach within ``handshake_timeout``.

A client has ``Config.handshake_timeout`` seconds (RabbitMQ's ``handshake_timeout``: 10 s) from
the moment its socket is accepted until the broker sends connection.open-ok. The deadline is
one timer per connection, started on accept and never replaced: neither data received (a
client sending one octet a second) nor the heartbeat negotiated in tune-ok extends it. When it
fires before open-ok the socket is aborted and one log line names the peer and the stage the
handshake reached (``stage``). The single-process server (connection.py) and the workers'
supervisor (workers.py, which runs the handshake up to connection.open itself) share this.
"""

from __future__ import annotations

import logging
from typing import Protocol

from warren.access.login import mechanisms_offered
from warren.protocol.amqp0_9_1.connection import ServerConnection
from warren.protocol.amqp0_10.connection import ServerConnection as ServerConnection0_10
from warren.protocol.amqp1_0.connection import HEADER_SASL as HEADER_SASL_1_0, ServerConnection as ServerConnection1_0
from warren.protocol.header import AMQP_0_10, AMQP_1_0, HEADER_SIZE

__all__ = ["HandshakeProgress", "default_vhost", "handshake_pending", "peer_name", "protocol_connection", "setup_failed",
           "stage"]

log = logging.getLogger("warren.server")


def default_vhost(config) -> str:
    """The vhost of a 0-10 or 1.0 client that names none: "/" if served, else the first."""
    return "/" if "/" in config.vhosts else config.vhosts[0]


def protocol_connection(dialect, header: bytes, config, server_properties: dict, tls):
    """The sans-IO connection for a client whose protocol header (``header``, its first octets)
    ``read_header`` read as ``dialect``; ``tls`` is its TLS session (warren/server/tls.py) or
    None. It is offered ``config.auth_mechanisms`` in that order, narrowed to what it can use
    (``mechanisms_offered``): EXTERNAL on TLS with a verified client certificate, ANONYMOUS over
    0-10 and 1.0 only with --anonymous-user."""
    c = config

    def offered(protocol: str) -> tuple[str, ...]:
        verified = tls is not None and b"EXTERNAL" in tls.mechanisms  # a verified client certificate
        return mechanisms_offered(c.auth_mechanisms, protocol, verified_certificate=verified,
                                  anonymous=bool(c.anonymous_user))

    if dialect is AMQP_0_10:
        mechanisms = offered("0-10")
        return ServerConnection0_10(server_properties, mechanisms, allow_anonymous="ANONYMOUS" in mechanisms,
                                    default_vhost=default_vhost(c), channel_max=c.channel_max or 0xFFFF,
                                    max_frame_size=min(c.frame_max or 0xFFFF, 0xFFFF),
                                    max_message_size=c.max_message_size)
    if dialect is AMQP_1_0:
        return ServerConnection1_0(sasl=bytes(header[:HEADER_SIZE]) == HEADER_SASL_1_0, mechanisms=offered("1.0"),
                                   max_frame_size=c.frame_max or 131_072, channel_max=c.channel_max or 0xFFFF,
                                   idle_timeout_ms=c.heartbeat * 1000, max_message_size=c.max_message_size,
                                   properties={"product": "Warren", "platform": "Python"})
    start_offer = " ".join(offered("0-9-1")).encode()
    return ServerConnection(server_properties, start_offer, c.frame_max, c.channel_max, c.heartbeat,
                            c.max_message_size, dialect=dialect)


class HandshakeProgress(Protocol):
    """What the deadline asks of a protocol core: both ServerConnections (AMQP 0-9-1 and its
    dialects, warren/protocol/amqp0_9_1/connection.py; AMQP 0-10, amqp0_10/connection.py)
    answer it, each from its own state machine."""

    @property
    def handshake_pending(self) -> bool:
        """open-ok not sent yet, and the connection not being closed."""

    @property
    def handshake_stage(self) -> str:
        """What the broker waits for, in words, for the log."""


def handshake_pending(conn: HandshakeProgress | None) -> bool:
    """True while the handshake has not reached open-ok (and is not being closed already);
    ``conn`` is None until a whole protocol header arrived."""
    return conn is None or conn.handshake_pending


def stage(header: bytes | bytearray, conn: HandshakeProgress | None) -> str:
    """The stage a handshake reached, for the log: ``header`` is what arrived before the
    protocol core existed, ``conn`` the protocol's ServerConnection (None before a full header)."""
    if conn is None:
        if not header:
            return "nothing received"
        return f"protocol header incomplete ({min(len(header), HEADER_SIZE)} of {HEADER_SIZE} octets)"
    return conn.handshake_stage


def setup_failed(peer, error: Exception) -> str:
    """``connection_made`` raised (our bug: nothing there refuses a client), in one process or in
    the supervisor's Greeter: the line that says what and who; returns the connection's close
    reason. The caller aborts the socket at once rather than leave a half-made connection to the
    handshake deadline."""
    log.error("closing the connection from %s at once: setting it up failed (a bug of ours): %s: %s",
              peer_name(peer), type(error).__name__, error, exc_info=error,
              extra={"event": "connection.setup_failed", "peer": peer_name(peer)})
    return f"setting up the connection failed: {type(error).__name__}: {error}"


def peer_name(peer) -> str:
    """host:port of a peer address tuple (IPv4 or IPv6), or its repr."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)
