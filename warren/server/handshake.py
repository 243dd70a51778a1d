"""The handshake time limit: what a connection must reach within ``handshake_timeout``.

A client has ``Config.handshake_timeout`` seconds (RabbitMQ's ``handshake_timeout``: 10 s) from
the moment its socket is accepted until the broker sends connection.open-ok. The deadline is
one timer per connection, started on accept and never replaced: neither data received (a
client sending one octet a second) nor the heartbeat negotiated in tune-ok extends it. When it
fires before open-ok the socket is aborted and one log line names the peer and the stage the
handshake reached (``stage``). The single-process server (connection.py) and the workers'
supervisor (workers.py, which runs the handshake up to connection.open itself) share this.
"""

from __future__ import annotations

from typing import Protocol

from warren.protocol.header import HEADER_SIZE

__all__ = ["HandshakeProgress", "handshake_pending", "peer_name", "stage"]


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


def peer_name(peer) -> str:
    """host:port of a peer address tuple (IPv4 or IPv6), or its repr."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)
