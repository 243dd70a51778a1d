"""What the sans-IO AMQP 1.0 connection tells its adapter (``ServerConnection.next_event``).

In the order an adapter meets them: ``SaslInit`` (check the login, then ``sasl_accept`` or
``sasl_refuse``), ``OpenRequested`` (open the virtual host, then ``accept_open`` or
``refuse_open``), ``SessionBegun`` / ``SessionEnded`` (already answered), ``AttachRequested``
(resolve the address, then ``accept_attach`` or ``refuse_attach``), ``CreditChanged`` (a link we
send on got credit, or a session's window opened: deliver), ``MessageReceived`` (a whole
transfer, its frames joined), ``DispositionReceived`` (the client settled deliveries of ours),
``LinkDetached`` (already answered), ``PeerError`` (the client broke the protocol and was answered
here: log it), ``ConnectionClosed`` (the close handshake is over).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SaslInit", "OpenRequested", "SessionBegun", "SessionEnded", "AttachRequested", "CreditChanged",
           "MessageReceived", "DispositionReceived", "LinkDetached", "PeerError", "ConnectionClosed"]


@dataclass
class SaslInit:
    mechanism: str  # "" when the client skipped the SASL layer (AMQP 0 1 0 0 straight away)
    response: bytes
    hostname: str | None


@dataclass
class OpenRequested:
    hostname: str | None
    container_id: str
    properties: dict


@dataclass
class SessionBegun:
    channel: int


@dataclass
class SessionEnded:
    channel: int
    by_peer: bool
    error: object = None  # the peer's error (an ``Error``), if it sent one


@dataclass
class AttachRequested:
    channel: int
    handle: int
    attach: object  # the client's ``Attach``


@dataclass
class CreditChanged:
    channel: int
    handle: int | None  # None: the session's window opened (every link of it may send again)
    drain: bool = False


@dataclass
class MessageReceived:
    channel: int
    handle: int
    delivery_id: int
    settled: bool
    payload: bytes


@dataclass
class DispositionReceived:
    channel: int
    first: int
    last: int
    settled: bool
    state: object  # an outcome (``Accepted``, ``Rejected``...) or None


@dataclass
class LinkDetached:
    channel: int
    handle: int
    closed: bool
    error: object = None


@dataclass
class PeerError:
    scope: str  # "connection", "session" or "link": what our answer ended
    condition: str
    text: str
    channel: int | None = None
    handle: int | None = None


@dataclass
class ConnectionClosed:
    by_peer: bool
    error: object = None
