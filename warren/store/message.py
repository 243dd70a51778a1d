"""The record a queue stores for one message: what is needed to deliver it again after a restart.

Layout: exchange (shortstr), routing key (shortstr), properties (longstr: the encoded property
list exactly as the publisher sent it), then the body up to the end of the record. Names are
encoded as the codec decodes them (UTF-8 with surrogateescape), so any wire octets round-trip.
"""

from __future__ import annotations

import logging
import struct

from warren.codec.properties import salvage_properties, well_formed
from warren.store.record import T_MESSAGE, append_seq_record

__all__ = ["encode_message", "encode_message_ss", "decode_message", "decode_restored", "append_message_record",
           "append_message_record_py"]

log = logging.getLogger("warren.store")

_U32 = struct.Struct(">I")
_last_good = b"\x00\x00"  # the last property list found well formed: most messages share theirs


def encode_message(exchange: str, routing_key: str, properties: bytes, body: bytes) -> bytes:
    ex = exchange.encode("utf-8", "surrogateescape")
    rk = routing_key.encode("utf-8", "surrogateescape")
    if len(ex) > 255 or len(rk) > 255:
        raise ValueError("exchange and routing key are limited to 255 octets")
    return b"".join((bytes((len(ex),)), ex, bytes((len(rk),)), rk, _U32.pack(len(properties)), properties, body))


def encode_message_ss(exchange_ss: bytes, routing_key_ss: bytes, properties: bytes, body) -> bytes:
    """``encode_message`` for names already shortstr-encoded (length octet included), as a
    queued ``Message`` keeps them: the same octets without encoding the names again."""
    return b"".join((exchange_ss, routing_key_ss, _U32.pack(len(properties)), properties, body))


def append_message_record_py(buf: bytearray, seq: int, exchange_ss: bytes, routing_key_ss: bytes, properties: bytes,
                             body) -> int:
    """The T_MESSAGE store record of ``encode_message_ss``'s parts under ``seq``, appended to
    ``buf`` (record.py's framing); returns the payload length. ``append_message_record`` is
    this compiled (warren/store/_records.c): the parts framed straight into ``buf``, the body
    copied once instead of joined first and copied again."""
    return append_seq_record(buf, T_MESSAGE, seq, encode_message_ss(exchange_ss, routing_key_ss, properties, body))


def decode_message(data) -> tuple[str, str, bytes, bytes]:
    """(exchange, routing_key, properties, body) from ``encode_message``'s output; ValueError if cut short."""
    try:
        n = data[0]
        off = 1 + n
        ex = bytes(data[1:off]).decode("utf-8", "surrogateescape")
        n = data[off]
        rk = bytes(data[off + 1:off + 1 + n]).decode("utf-8", "surrogateescape")
        off += 1 + n
        (n,) = _U32.unpack_from(data, off)
    except (IndexError, struct.error):
        raise ValueError("message record cut short") from None
    off += 4
    if off + n > len(data):
        raise ValueError("message record cut short")
    return ex, rk, bytes(data[off:off + n]), bytes(data[off + n:])


try:
    from warren.store._records import append_message_record
except ImportError:
    append_message_record = append_message_record_py


def decode_restored(data) -> tuple[str, str, bytes, bytes]:
    """``decode_message`` for a message coming back into a queue (recovery, paging in, a delayed
    message falling due). A property list that is not well formed, which only a data folder
    written before Warren checked lists at the edge can hold (issue 16), is salvaged (a bad
    headers table becomes an empty one, ``warren/codec/properties.py``) and the loss logged: the
    message is kept, and no consumer receives a list it cannot decode."""
    global _last_good
    exchange, routing_key, properties, body = decode_message(data)
    if properties != _last_good:
        if well_formed(properties):
            _last_good = properties
        else:
            properties, dropped = salvage_properties(properties)
            log.warning("a stored message (exchange %r, routing key %r) had a malformed property list, kept "
                        "without: %s", exchange, routing_key, dropped)
    return exchange, routing_key, properties, body
