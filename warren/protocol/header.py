"""Protocol-header dispatch: the first 8 octets a client sends choose the AMQP version.

INVENTORY.md §2. An unsupported header is answered with the header of the best version we
speak (0-9-1, as RabbitMQ does) and the socket is closed (0-8/0-9/0-9-1 §4.2.2).
"""

from __future__ import annotations

__all__ = ["HEADER_SIZE", "PREFERRED_HEADER", "match_header"]

HEADER_SIZE = 8
PREFERRED_HEADER = b"AMQP\x00\x00\x09\x01"

# header -> version key of the protocol module that serves it
_VERSIONS = {
    b"AMQP\x00\x00\x09\x01": "0-9-1",
}


def match_header(header: bytes) -> str | None:
    """The version key for an 8-octet header, or None when we do not speak it."""
    return _VERSIONS.get(bytes(header[:HEADER_SIZE]))
