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

from warren.protocol.amqp0_9_1.state import State
from warren.protocol.header import HEADER_SIZE

__all__ = ["handshake_pending", "peer_name", "stage"]

# what the broker waits for in each pre-open state of the connection state machine
_WAITING = {
    State.AWAIT_START_OK: "sent connection.start, waiting for start-ok",
    State.LOGIN: "checking the login",
    State.AWAIT_TUNE_OK: "sent connection.tune, waiting for tune-ok",
    State.AWAIT_OPEN: "got tune-ok, waiting for connection.open",
    State.OPENING: "opening the virtual host",
}


def handshake_pending(conn) -> bool:
    """True while the handshake has not reached open-ok (and is not being closed already)."""
    if conn is None:
        return True
    pending = getattr(conn, "handshake_pending", None)  # AMQP 0-10's connection says it itself
    if pending is not None:
        return pending
    return conn.state.state in _WAITING


def stage(header: bytes | bytearray, conn) -> str:
    """The stage a handshake reached, for the log: ``header`` is what arrived before the
    protocol core existed, ``conn`` the ServerConnection (None before a full header)."""
    if conn is None:
        if not header:
            return "nothing received"
        return f"protocol header incomplete ({min(len(header), HEADER_SIZE)} of {HEADER_SIZE} octets)"
    stage_0_10 = getattr(conn, "handshake_stage", None)
    if stage_0_10 is not None:
        return stage_0_10
    return _WAITING.get(conn.state.state, conn.state.state.value)


def peer_name(peer) -> str:
    """host:port of a peer address tuple (IPv4 or IPv6), or its repr."""
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)
