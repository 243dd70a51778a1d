"""Protocol-header dispatch: the first 8 octets a client sends choose the AMQP dialect.

INVENTORY.md §2. AMQP 0-10's header is recognised as its own protocol (``AMQP_0_10``), and
AMQP 1.0's two (``AMQP_1_0``: ``AMQP 3 1 0 0`` with SASL, ``AMQP 0 1 0 0`` without). An
unsupported header (HTTP, ...) is answered with the header of the best
version we speak (0-9-1, as RabbitMQ does) and the socket is closed (0-8/0-9/0-9-1 §4.2.2).
"""

from __future__ import annotations

from warren.protocol.dialects import Dialect, get_dialect

__all__ = ["HEADER_SIZE", "PREFERRED_HEADER", "HEADERS", "NEED_MORE", "match_header", "read_header",
           "HEADER_0_10", "AMQP_0_10", "SERVE_0_10", "is_0_10", "HEADERS_1_0", "AMQP_1_0", "SERVE_1_0"]

HEADER_SIZE = 8
PREFERRED_HEADER = b"AMQP\x00\x00\x09\x01"

# header -> key of the dialect that serves it (warren.protocol.dialects)
HEADERS = {
    b"AMQP\x00\x00\x09\x01": "0-9-1",
    b"AMQP\x01\x01\x08\x00": "0-8",       # 0-8 as the XML and every deployed 0-8 peer have it
    b"AMQP\x01\x01\x09\x01": "0-8",       # 0-8 as misprinted in its PDF; py-amqplib sends it (RabbitMQ: 0-8)
    b"AMQP\x01\x01\x00\x09": "0-9",
    b"AMQP\x01\x01\x00\x5b": "0-91-qpid",  # Qpid's "0-91" (minor 91)
}


# AMQP 0-10 (issue 14): another protocol family, served by warren.protocol.amqp0_10 (its own
# connection and broker adapter), not a Dialect: read_header answers AMQP_0_10 for its header.
# With SERVE_0_10 False it would be refused as any unsupported header (our preferred header,
# then close).
HEADER_0_10 = b"AMQP\x01\x01\x00\x0a"
AMQP_0_10 = "0-10"  # read_header's answer for the 0-10 header
SERVE_0_10 = True


# AMQP 1.0 (issue 36): a third family (warren.protocol.amqp1_0), its SASL header (protocol id 3)
# or its plain one (protocol id 0); read_header answers AMQP_1_0 for either.
HEADERS_1_0 = (b"AMQP\x03\x01\x00\x00", b"AMQP\x00\x01\x00\x00")
AMQP_1_0 = "1.0"
SERVE_1_0 = True


def is_0_10(header) -> bool:
    return bytes(header[:HEADER_SIZE]) == HEADER_0_10


def match_header(header: bytes) -> Dialect | None:
    """The dialect for an 8-octet header, or None when we do not speak it."""
    key = HEADERS.get(bytes(header[:HEADER_SIZE]))
    return None if key is None else get_dialect(key)


NEED_MORE = "need more"  # read_header: fewer than 8 octets so far, and they could still be AMQP


def read_header(received) -> Dialect | str | None:
    """What the first octets a client sent say: its dialect, ``NEED_MORE``, or None when it is
    not a header we speak (not AMQP at all is known from the first octets, without waiting for 8)."""
    if len(received) < HEADER_SIZE:
        return NEED_MORE if b"AMQP".startswith(bytes(received[:4])) else None
    if SERVE_0_10 and is_0_10(received):
        return AMQP_0_10
    if SERVE_1_0 and bytes(received[:HEADER_SIZE]) in HEADERS_1_0:
        return AMQP_1_0
    return match_header(received)
