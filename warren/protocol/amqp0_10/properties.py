"""Message properties between AMQP 0-10 and the broker's 0-9-1 property list (docs/versions.md).

The broker keeps every message's properties as an encoded 0-9-1 ``basic`` property list
(``warren/broker/message.py``), so a message published over 0-10 is consumed over 0-9-1 and the
reverse. A 0-10 transfer carries two structs in its header: ``delivery-properties`` (routing,
persistence, priority, ttl) and ``message-properties`` (content type, ids, reply-to,
application headers). The mapping, both ways:

=====================================  ======================================================
0-10                                   0-9-1 ``basic`` property
=====================================  ======================================================
delivery-properties.priority           priority
delivery-properties.delivery-mode      delivery-mode (1 non-persistent, 2 persistent)
delivery-properties.ttl (ms)           expiration (the same number of ms, as a string)
delivery-properties.timestamp          timestamp (seconds)
delivery-properties.routing-key        the routing key of the publish / of basic.deliver
delivery-properties.exchange           the exchange of basic.deliver (not a property)
delivery-properties.redelivered        basic.deliver's redelivered (not a property)
message-properties.content-type        content-type
message-properties.content-encoding    content-encoding
message-properties.message-id (uuid)   message-id (the UUID as text); a message-id that is
                                       not a UUID travels to 0-10 in the application header
                                       ``x-amqp-0-9-1.message-id``
message-properties.correlation-id      correlation-id (octets <-> UTF-8 text)
message-properties.reply-to            reply-to: ``routing-key`` when the exchange is empty,
                                       else ``exchange/routing-key``; back, a reply-to with a
                                       ``/`` is split at the first one
message-properties.user-id             user-id (checked against the login, as for 0-9-1)
message-properties.app-id              app-id
message-properties.application-headers headers (``qpid.subject`` and every other key kept)
(application header                    type, cluster-id: the 0-9-1 properties 0-10 has no
 ``x-amqp-0-9-1.type``/``.cluster-id``)  field for
=====================================  ======================================================

Header values: 0-10's typed values and 0-9-1's field-table values are converted by type
(strings, binaries, booleans, signed and unsigned integers of each width, floats, decimals,
timestamps, maps/tables, lists/arrays, void); a 0-10 UUID becomes its text, a value of a 0-10
type 0-9-1 has no form for (an unknown type code) is dropped.
"""

from __future__ import annotations

import datetime
import decimal
import struct
import uuid

from warren.codec.amqp0_10 import types as t
from warren.spec.fields import RawValue
from warren.spec import amqp0_10 as spec
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["to_basic", "from_basic", "headers_to_table", "table_to_map", "TYPE_HEADER", "CLUSTER_ID_HEADER",
           "MESSAGE_ID_HEADER"]

TYPE_HEADER = "x-amqp-0-9-1.type"
CLUSTER_ID_HEADER = "x-amqp-0-9-1.cluster-id"
MESSAGE_ID_HEADER = "x-amqp-0-9-1.message-id"

_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)

# 0-10 integer classes -> the 0-9-1 field-table tag that keeps their width and sign
_INT_TAGS = {
    t.Int8: (b"b", struct.Struct(">b")), t.UInt8: (b"B", struct.Struct(">B")),
    t.Int16: (b"s", struct.Struct(">h")), t.UInt16: (b"u", struct.Struct(">H")),
    t.Int32: (b"I", struct.Struct(">i")), t.UInt32: (b"i", struct.Struct(">I")),
}
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")


# --- 0-10 -> 0-9-1 --------------------------------------------------------------------------------

def _to_field(v):
    """A 0-10 typed value as a 0-9-1 field-table value (None means: drop the entry)."""
    if v is None or isinstance(v, (bool, decimal.Decimal)):
        return v
    tagged = _INT_TAGS.get(type(v))
    if tagged is not None:
        tag, st = tagged
        return RawValue(tag + st.pack(v))
    if type(v) is t.Datetime:
        return _EPOCH + datetime.timedelta(seconds=int(v)) if 0 <= v <= 253_402_300_799 else int(v)
    if isinstance(v, int):
        return RawValue(b"l" + _I64.pack(v)) if -(1 << 63) <= v < (1 << 63) else str(v)
    if type(v) is t.Float32:
        return RawValue(b"f" + _F32.pack(v))
    if isinstance(v, float):
        return v
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return headers_to_table(v)
    if isinstance(v, list):
        return [x for x in (_to_field(i) for i in v) if x is not _DROP]
    if isinstance(v, t.Bit):
        return True
    return _DROP


_DROP = object()


def headers_to_table(headers: dict) -> dict:
    """0-10 application headers (a map) as a 0-9-1 field table."""
    out = {}
    for k, v in headers.items():
        value = _to_field(v)
        if value is not _DROP:
            out[str(k)] = value
    return out


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "surrogateescape")
    return str(v)


def _short(s: str | None) -> str | None:
    """At most a shortstr's 255 octets."""
    if s is None:
        return None
    b = s.encode("utf-8", "surrogateescape")
    return s if len(b) <= 255 else b[:255].decode("utf-8", "ignore")


def _property_header(headers: dict, name: str) -> str | None:
    """Take ``headers[name]`` out as a shortstr property's value when it is one."""
    value = headers.get(name)
    if not isinstance(value, str) or _short(value) != value:
        return None
    del headers[name]
    return value


def to_basic(delivery, message) -> bytes:
    """The encoded 0-9-1 property list of a transfer's delivery- and message-properties
    (either may be None)."""
    p = BasicProperties()
    if delivery is not None:
        if delivery.priority is not None:
            p.priority = delivery.priority & 0xFF
        if delivery.delivery_mode is not None:
            p.delivery_mode = delivery.delivery_mode & 0xFF
        if delivery.ttl is not None:
            p.expiration = str(delivery.ttl)
        if delivery.timestamp is not None:
            p.timestamp = delivery.timestamp
    headers = None
    if message is not None:
        p.content_type = _short(message.content_type)
        p.content_encoding = _short(message.content_encoding)
        if message.message_id is not None:
            p.message_id = str(message.message_id)
        p.correlation_id = _short(_text(message.correlation_id))
        reply_to = message.reply_to
        if reply_to is not None:
            key = reply_to.routing_key or ""
            p.reply_to = _short(f"{reply_to.exchange}/{key}" if reply_to.exchange else key)
        p.user_id = _short(_text(message.user_id))
        p.app_id = _short(_text(message.app_id))
        if message.application_headers:
            headers = headers_to_table(message.application_headers)
            # the 0-9-1 properties 0-10 has no field for, as from_basic carries them; a header of
            # that name that is not such a property (not text, or too long) stays a header
            p.type = _property_header(headers, TYPE_HEADER)
            p.cluster_id = _property_header(headers, CLUSTER_ID_HEADER)
            if p.message_id is None:
                p.message_id = _property_header(headers, MESSAGE_ID_HEADER)
    p.headers = headers or None
    return p.encode()


# --- 0-9-1 -> 0-10 --------------------------------------------------------------------------------

def _to_typed(v):
    """A 0-9-1 field-table value (as ``decode_table`` gives it) as a 0-10 typed value."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_UTC)
        return t.Datetime(int((v - _EPOCH).total_seconds()))
    if isinstance(v, dict):
        return table_to_map(v)
    if isinstance(v, list):
        return [_to_typed(i) for i in v]
    if isinstance(v, decimal.Decimal):
        return v
    return v  # str -> str16, bytes -> vbin32, bool, int -> int64, float -> double, None -> void


def table_to_map(table: dict) -> dict:
    """A 0-9-1 field table as 0-10 application headers."""
    return {k: _to_typed(v) for k, v in table.items()}


def _uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except (ValueError, AttributeError, TypeError):
        return None


def from_basic(p: BasicProperties, exchange: str, routing_key: str, redelivered: bool):
    """(delivery-properties, message-properties or None) for a message going out over 0-10."""
    delivery = spec.MessageDeliveryProperties(exchange=exchange, routing_key=routing_key,
                                              redelivered=bool(redelivered))
    if p.priority is not None:
        delivery.priority = p.priority  # an octet both ways; Qpid's brokers pass 10+ through too
    if p.delivery_mode in (1, 2):
        delivery.delivery_mode = p.delivery_mode
    if p.expiration is not None and p.expiration.isdigit():
        delivery.ttl = int(p.expiration)
    if p.timestamp is not None:
        delivery.timestamp = int(p.timestamp.timestamp()) if isinstance(p.timestamp, datetime.datetime) \
            else int(p.timestamp)
    headers = table_to_map(p.headers) if p.headers else {}
    message_id = None
    if p.message_id is not None:
        message_id = _uuid(p.message_id)
        if message_id is None:
            headers[MESSAGE_ID_HEADER] = p.message_id
    if p.type is not None:
        headers[TYPE_HEADER] = p.type
    if p.cluster_id is not None:
        headers[CLUSTER_ID_HEADER] = p.cluster_id
    reply_to = None
    if p.reply_to is not None:
        exchange_name, sep, key = p.reply_to.partition("/")
        reply_to = spec.MessageReplyTo(exchange=exchange_name, routing_key=key) if sep else \
            spec.MessageReplyTo(exchange="", routing_key=p.reply_to)
    fields = (p.content_type, p.content_encoding, message_id, p.correlation_id, reply_to, p.user_id, p.app_id)
    if not headers and all(f is None for f in fields):
        return delivery, None
    message = spec.MessageMessageProperties(
        message_id=message_id, content_type=p.content_type, content_encoding=p.content_encoding,
        correlation_id=_bin(p.correlation_id), reply_to=reply_to, user_id=_bin(p.user_id), app_id=_bin(p.app_id),
        application_headers=headers or None)
    return delivery, message


def _bin(s: str | None) -> bytes | None:
    return None if s is None else s.encode("utf-8", "surrogateescape")[:0xFFFF]


def plain_arguments(arguments: dict | None) -> dict:
    """A 0-10 ``arguments`` map (of queue.declare, subscribe, bind ...) as the broker's plain
    values: typed integers and strings become ``int`` and ``str``, a UUID its text."""
    return {str(k): _plain(v) for k, v in arguments.items()} if arguments else {}


def _plain(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    if isinstance(v, dict):
        return plain_arguments(v)
    if isinstance(v, list):
        return [_plain(i) for i in v]
    if isinstance(v, uuid.UUID):
        return str(v)
    return v
