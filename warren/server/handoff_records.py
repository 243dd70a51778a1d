"""The records the node's processes hand each other connections in (handoff.py receives them,
workers.py sends them, placement.py moves a connection between workers).

A hand-over is one SOCK_SEQPACKET record: a plain one (``pack_handoff``) names the client's
address and the vhost the supervisor resolved, then carries every octet the client has sent;
a relayed TLS connection's (``pack_relayed``, first octet ``RELAYED``) says first what its
socket pair cannot (the client's address and ours, the TLS session); a failed login's
(``pack_failed_login``, first octet ``FAILED_LOGIN``) carries the address only. Kept apart from
the receiving end so that what packs and unpacks records imports no connection class.
"""

from __future__ import annotations

import json
import struct

from warren.server.tls import TlsSession

__all__ = ["pack_handoff", "unpack_handoff", "pack_relayed", "unpack_relayed", "Relayed", "RECORD_MAX",
           "RELAYED", "FAILED_LOGIN", "pack_failed_login", "unpack_failed_login"]

RECORD_MAX = 1 << 20  # the handshake octets a hand-over carries at most (start-ok is ~frame-max)
_PEER = struct.Struct(">H")


def pack_handoff(peer_host: str, peer_port: int, received: bytes, vhost: str = "/") -> bytes:
    """host length, host, port, vhost length, vhost (UTF-8, 16-bit lengths), then the octets."""
    host = peer_host.encode()
    name = vhost.encode("utf-8", "surrogateescape")
    return _PEER.pack(len(host)) + host + _PEER.pack(peer_port) + _PEER.pack(len(name)) + name + received


def unpack_handoff(record: bytes) -> tuple[tuple[str, int], str, bytes]:
    """((peer host, peer port), vhost, received octets); ValueError/struct.error if malformed."""
    (n,) = _PEER.unpack_from(record, 0)
    host = record[2:2 + n].decode()
    (port,) = _PEER.unpack_from(record, 2 + n)
    (v,) = _PEER.unpack_from(record, 4 + n)
    if 6 + n + v > len(record):
        raise ValueError("vhost name runs past the record")
    vhost = record[6 + n:6 + n + v].decode("utf-8", "surrogateescape")
    return (host, port), vhost, record[6 + n + v:]


RELAYED = b"T"  # first octet of a relayed TLS connection's record (a plain one's is 0: a 16-bit length < 256)
_SIZE = struct.Struct(">I")


FAILED_LOGIN = b"F"  # first octet of a failed login's record (no descriptor): the address follows


def pack_failed_login(host: str) -> bytes:
    return FAILED_LOGIN + host.encode()


def unpack_failed_login(record: bytes) -> str:
    return record[1:].decode()


class Relayed:
    """What a relayed TLS connection's socket pair cannot tell the worker (relay.py)."""

    __slots__ = ("peer", "local", "tls")

    def __init__(self, peer: tuple[str, int], local: tuple[str, int], tls: TlsSession) -> None:
        self.peer = peer
        self.local = local
        self.tls = tls


def pack_relayed(relayed: Relayed, vhost: str, received: bytes) -> bytes:
    about = json.dumps({"peer": list(relayed.peer), "local": list(relayed.local),
                        "tls": relayed.tls.to_record()}).encode()
    return RELAYED + _SIZE.pack(len(about)) + about + pack_handoff(relayed.peer[0], relayed.peer[1], received, vhost)


def unpack_relayed(record: bytes) -> tuple[Relayed, bytes]:
    """(what the record says of the connection, the plain hand-over record inside); ValueError,
    KeyError or struct.error if malformed."""
    (n,) = _SIZE.unpack_from(record, 1)
    about = json.loads(record[5:5 + n])
    peer, local = about["peer"], about["local"]
    relayed = Relayed((str(peer[0]), int(peer[1])), (str(local[0]), int(local[1])),
                      TlsSession.from_record(about["tls"]))
    return relayed, record[5 + n:]
