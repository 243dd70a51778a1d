"""AMQP 1.0 messages and the broker's messages (an encoded 0-9-1 property list and a body).

The broker keeps every message as 0-9-1 keeps it (``warren/broker/message.py``), so a message sent
over 1.0 is consumed over 0-9-1, 0-10 or 0-8 and back. The mapping follows RabbitMQ 4's
(its ``mc_amqpl`` conversion, written down in docs/versions.md, "AMQP 1.0"):

=====================================  ========================================================
1.0                                    0-9-1 ``basic`` property
=====================================  ========================================================
header.durable                         delivery-mode 2 (true) or 1 (false)
header.priority                        priority (only when the header sets it)
header.ttl (ms)                        expiration (the same number, as a string)
properties.message-id                  message-id: a string as is, a uuid as ``urn:uuid:...``,
                                       a ulong in decimal; a binary (or a string past 255
                                       octets) goes to the header ``x-message-id``
properties.correlation-id              correlation-id, the same way (``x-correlation-id``)
properties.user-id (binary)            user-id (when it is a short UTF-8 string)
properties.reply-to                    reply-to
properties.content-type / -encoding    content-type / content-encoding
properties.creation-time (ms)          timestamp (seconds)
properties.group-id                    app-id
application-properties                 headers (string keys up to 255 octets)
message-annotations ``x-*``            headers of the same name (``x-cc``: ``CC``); back, every
                                       ``x-*`` header is a message annotation, and non-``x-``
                                       headers of simple types are application properties
message-annotations ``x-basic-type``   type
one or more data sections              the body (their octets joined)
amqp-value / amqp-sequence bodies      the sections' encoding as the body, type ``amqp-1.0``
                                       (decoded again for a 1.0 consumer)
=====================================  ========================================================

What 0-9-1 has no property for (``to``, ``subject``, ``absolute-expiry-time``, ``group-sequence``,
``reply-to-group-id``, a ulong or binary message-id or correlation-id) travels in the header
``x-amqp-1.0-properties`` (the encoded properties section holding those fields, RabbitMQ 3.13's
name), so a 1.0 consumer gets them back. Deliveries over 1.0 carry RabbitMQ 4's annotations
``x-exchange`` and ``x-routing-key``, and a header whose ``first-acquirer`` is true for a first
delivery (false, with ``delivery-count`` 1, when redelivered).
"""

from __future__ import annotations

import datetime
import decimal
import uuid

from warren.codec.amqp1_0 import types as t
from warren.spec.fields import Long as Long091
from warren.spec import amqp1_0 as spec
from warren.spec.amqp0_9_1 import BasicProperties

__all__ = ["Sections", "View", "annotations_as_headers", "parse", "to_broker", "view", "from_broker", "AMQP10_TYPE", "PROPERTIES_HEADER"]

AMQP10_TYPE = "amqp-1.0"
PROPERTIES_HEADER = "x-amqp-1.0-properties"
_SECTION_CODES = {**{sym: code for sym, code, _ in spec.DESCRIBED.values()},
                  spec.Header.SYMBOL: spec.Header.CODE, spec.Properties.SYMBOL: spec.Properties.CODE}
_HEADER, _DA, _MA, _PROPS, _AP, _DATA, _SEQ, _VALUE, _FOOTER = range(0x70, 0x79)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_KEPT = ("to", "subject", "absolute_expiry_time", "group_sequence", "reply_to_group_id")


class Sections:
    """The sections of a message as sent (part 3 §3.2), the header's fields as present."""

    __slots__ = ("header", "message_annotations", "properties", "application_properties", "body", "body_octets",
                 "footer")

    def __init__(self) -> None:
        self.header: list | None = None  # the header's list as sent (absent fields are missing or null)
        self.message_annotations: dict = {}
        self.properties = None  # a spec.Properties
        self.application_properties: dict = {}
        self.body: list = []  # (section code, value)
        self.body_octets = b""  # the body sections' encoding as sent
        self.footer = None


def parse(payload) -> Sections:
    """The sections of an encoded message; DecodeError when it is not one."""
    s = Sections()
    off, end = 0, len(payload)
    seen: set = set()
    body_kind = None
    body_parts = []
    while off < end:
        start = off
        if payload[off] != 0x00:
            raise t.DecodeError("a message section is not a described value")
        descriptor, off = t.decode_value(payload, off + 1, end)
        code = _SECTION_CODES.get(descriptor) if isinstance(descriptor, str) else int(descriptor) \
            if isinstance(descriptor, int) and not isinstance(descriptor, bool) else None
        if code is None or not _HEADER <= code <= _FOOTER:
            raise t.DecodeError(f"{descriptor!r} is not a message section")
        value, off = t.decode_value(payload, off, end)
        # Part 3 §3.2 orders the sections, but Qpid Proton sends a request's amqp-value before
        # its properties (RabbitMQ's clients' management requests): the order is not enforced;
        # a section twice, or two kinds of body, is refused.
        if _DATA <= code <= _VALUE:
            if body_kind is not None and (body_kind != code or code == _VALUE):
                raise t.DecodeError("a message mixes body sections or has two amqp-value sections (part 3 §3.2)")
            body_kind = code
        elif code in seen:
            raise t.DecodeError(f"a message section (0x{code:02x}) appears twice (part 3 §3.2)")
        seen.add(code)
        if code == _HEADER:
            if not isinstance(value, list):
                raise t.DecodeError("the header section is not a list")
            s.header = value
        elif code == _MA:
            s.message_annotations = _map(value, "message-annotations")
        elif code == _PROPS:
            s.properties = t.composite_from_list(spec.Properties, value)
        elif code == _AP:
            s.application_properties = _map(value, "application-properties")
        elif code == _FOOTER:
            s.footer = value
        elif code != _DA:
            if code == _DATA and not isinstance(value, bytes):
                raise t.DecodeError("a data section is not binary")
            s.body.append((code, value))
            body_parts.append(bytes(payload[start:off]))
    s.body_octets = b"".join(body_parts)
    return s


def _map(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise t.DecodeError(f"the {what} section is not a map")
    return value


def _header_field(header: list | None, i: int):
    return header[i] if header is not None and i < len(header) else None


# --- 1.0 -> the broker ----------------------------------------------------------------------------

def _to_091(v):
    """A 1.0 value as a 0-9-1 field-table value; ``_DROP`` when 0-9-1 has no form for it."""
    if v is None or type(v) is bool or type(v) is bytes:
        return v
    if isinstance(v, str):
        return str(v)
    if type(v) is t.Timestamp:
        try:
            return _EPOCH + datetime.timedelta(milliseconds=int(v))
        except OverflowError:
            return _DROP
    if type(v) in (t.Long, t.ULong):
        return Long091(v) if v < (1 << 63) else _DROP
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, uuid.UUID):
        return f"urn:uuid:{v}"
    if isinstance(v, dict):
        return {str(k): x for k, x in ((k, _to_091(x)) for k, x in v.items()) if isinstance(k, str) and x is not _DROP}
    if isinstance(v, list):
        return [x for x in map(_to_091, v) if x is not _DROP]
    return _DROP


_DROP = object()


def _message_id(v, header: str, headers: dict) -> str | None:
    if v is None:
        return None
    if isinstance(v, uuid.UUID):
        return f"urn:uuid:{v}"
    if type(v) is t.ULong or (isinstance(v, int) and not isinstance(v, bool)):
        return str(int(v))
    if isinstance(v, str) and len(v.encode("utf-8")) <= 255:
        return str(v)
    headers[header] = bytes(v) if isinstance(v, (bytes, bytearray)) else str(v)
    return None


def _shortstr(v) -> str | None:
    if isinstance(v, bytes):
        try:
            v = v.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(v, str) and len(v.encode("utf-8")) <= 255:
        return str(v)
    return None


_NOT_HEADERS = ("x-basic-type", "x-basic-delivery-mode", "x-basic-priority", "x-basic-expiration", "x-exchange",
                "x-routing-key")


def annotations_as_headers(annotations: dict) -> dict:
    """The ``x-`` message annotations of a map as 0-9-1 headers of the same names (``x-cc``:
    ``CC``): a message's own (``to_broker``) or a ``modified`` outcome's. Keys that are not
    ``x-``, or name a property 0-9-1 keeps elsewhere, are left out."""
    headers = {}
    for k, v in annotations.items():
        if not isinstance(k, str) or not k.startswith("x-") or len(k.encode("utf-8")) > 255 or k in _NOT_HEADERS:
            continue
        v = _to_091(v)
        if v is not _DROP:
            headers["CC" if k == "x-cc" else str(k)] = v
    return headers


def to_broker(s: Sections) -> tuple[bytes, bytes]:
    """(encoded 0-9-1 property list, body) of a message received over 1.0."""
    h = s.header
    durable = _header_field(h, 0)
    priority = _header_field(h, 1)
    ttl = _header_field(h, 2)
    ma = s.message_annotations
    headers: dict = {}
    for k, v in s.application_properties.items():
        if isinstance(k, str) and len(k.encode("utf-8")) <= 255:
            v = _to_091(v)
            if v is not _DROP:
                headers[str(k)] = v
    headers.update(annotations_as_headers(ma))
    p = s.properties or spec.Properties()
    message_id = _message_id(p.message_id, "x-message-id", headers)
    correlation_id = _message_id(p.correlation_id, "x-correlation-id", headers)
    kept = {name: getattr(p, name) for name in _KEPT if getattr(p, name) is not None}
    for name in ("message_id", "correlation_id"):
        v = getattr(p, name)
        if v is not None and not isinstance(v, (str, uuid.UUID)):
            kept[name] = v
    if kept:
        headers[PROPERTIES_HEADER] = t.encode(spec.Properties(**kept))
    body_type = ma.get("x-basic-type")
    body_type = str(body_type) if isinstance(body_type, str) else None
    if s.body and all(code == _DATA for code, _ in s.body):
        body = b"".join(v for _, v in s.body)
    elif s.body:
        body, body_type = s.body_octets, AMQP10_TYPE
    else:
        body = b""
    creation = p.creation_time
    props = BasicProperties(
        content_type=_shortstr(p.content_type), content_encoding=_shortstr(p.content_encoding),
        headers=headers or None,
        delivery_mode=(2 if durable else 1) if durable is not None else None,
        priority=int(priority) if priority is not None and 0 <= priority <= 255 else None,
        correlation_id=correlation_id, reply_to=_shortstr(p.reply_to),
        expiration=str(int(ttl)) if ttl is not None else None, message_id=message_id,
        timestamp=int(creation) // 1000 if creation is not None and creation >= 0 else None,
        type=body_type, user_id=_shortstr(p.user_id), app_id=_shortstr(p.group_id))
    return props.encode(), body


# --- the broker -> 1.0 ----------------------------------------------------------------------------

def _from_091(v):
    if v is None or type(v) is bool or isinstance(v, (str, bytes)):
        return v
    if type(v) is Long091:
        return t.Long(v)
    if isinstance(v, int):
        return t.Int(v) if -(1 << 31) <= v < (1 << 31) else t.Long(v)
    if isinstance(v, float):
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return t.Timestamp(int((v - _EPOCH).total_seconds() * 1000))
    if isinstance(v, dict):
        return {t.Symbol(k) if k.isascii() else k: _from_091(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_from_091(x) for x in v]
    return None


def _id_from_091(v: str | None):
    if v is None:
        return None
    if v.startswith("urn:uuid:"):
        try:
            return uuid.UUID(v[9:])
        except ValueError:
            pass
    return v


class View:
    """A broker message as a 1.0 consumer sees it, before encoding: what a link's property
    filters (``filters.py``) read, then ``encode`` for the transfer."""

    __slots__ = ("msg", "header", "annotations", "properties", "application")

    def __init__(self, msg, header, annotations: dict, properties, application: dict) -> None:
        self.msg, self.header, self.annotations = msg, header, annotations
        self.properties, self.application = properties, application

    def encode(self) -> bytes:
        return self.encode_head() + _body(self.msg, self.msg.decoded.type == AMQP10_TYPE)

    def encode_head(self) -> bytes:
        """The sections before the body."""
        p = self.properties
        sections = [t.encode(self.header), t.encode(t.Described(t.ULong(_MA), self.annotations))]
        if any(getattr(p, f.name) is not None for f in spec.Properties.FIELDS):
            sections.append(t.encode(p))
        if self.application:
            sections.append(t.encode(t.Described(t.ULong(_AP), self.application)))
        return b"".join(sections)


def _body(msg, amqp10: bool) -> bytes:
    if amqp10:
        return bytes(msg.body)  # the body sections as the 1.0 publisher sent them
    return _data_section(msg.body)


def view(msg, redelivered: bool) -> View:
    """The 1.0 sections (but the body) of a delivery of the broker's message ``msg``."""
    b = msg.decoded
    headers = dict(b.headers or {})
    header = spec.Header(durable=b.delivery_mode == 2, first_acquirer=not redelivered,
                         delivery_count=1 if redelivered else 0)
    if b.priority is not None:
        header.priority = b.priority
    if b.expiration is not None and b.expiration.isdigit():
        header.ttl = int(b.expiration)
    annotations = {t.Symbol("x-exchange"): msg.exchange, t.Symbol("x-routing-key"): msg.routing_key}
    kept_octets = headers.pop(PROPERTIES_HEADER, None)
    application = {}
    for k, v in headers.items():
        if k.startswith("x-"):
            annotations[t.Symbol(k) if k.isascii() else k] = _from_091(v)
        elif k == "CC" and isinstance(v, list):
            annotations[t.Symbol("x-cc")] = _from_091(v)
        elif not isinstance(v, (dict, list, tuple)):
            application[k] = _from_091(v)
    if b.type is not None and b.type != AMQP10_TYPE:
        annotations[t.Symbol("x-basic-type")] = b.type
    p = spec.Properties(
        message_id=_id_from_091(b.message_id), user_id=b.user_id.encode("utf-8") if b.user_id is not None else None,
        reply_to=b.reply_to, correlation_id=_id_from_091(b.correlation_id),
        content_type=t.Symbol(b.content_type) if b.content_type is not None and b.content_type.isascii() else None,
        content_encoding=t.Symbol(b.content_encoding) if b.content_encoding is not None and b.content_encoding.isascii() else None,
        creation_time=t.Timestamp(b.timestamp * 1000) if b.timestamp is not None else None, group_id=b.app_id)
    if isinstance(kept_octets, (bytes, str)):
        try:
            kept = t.decode(kept_octets.encode("latin-1") if isinstance(kept_octets, str) else kept_octets)
        except (t.DecodeError, UnicodeEncodeError):
            kept = None
        if isinstance(kept, spec.Properties):
            for f in spec.Properties.FIELDS:
                v = getattr(kept, f.name)
                if v is not None:
                    setattr(p, f.name, v)
    return View(msg, header, annotations, p, application)


# Messages published alike (one publisher's stream) have the same property octets, exchange and
# routing key, so the same sections before the body: encoded once, kept here (bounded).
_HEADS: dict = {}
_HEADS_MAX = 1024
_HEAD_KEY_MAX = 4096  # property lists longer than this are not kept


def from_broker(msg, redelivered: bool) -> bytes:
    """The encoded 1.0 message of a delivery of the broker's message ``msg``."""
    props = msg.properties
    keep = type(props) is bytes and len(props) <= _HEAD_KEY_MAX
    key = (props, msg.exchange, msg.routing_key, redelivered) if keep else None
    cached = _HEADS.get(key) if keep else None
    if cached is None:
        v = view(msg, redelivered)
        cached = (v.encode_head(), msg.decoded.type == AMQP10_TYPE)
        if keep:
            if len(_HEADS) >= _HEADS_MAX:
                _HEADS.clear()
            _HEADS[key] = cached
    return cached[0] + _body(msg, cached[1])


def _data_section(body) -> bytes:
    n = len(body)
    head = b"\x00\x53\x75" + (bytes((0xA0, n)) if n < 256 else b"\xb0" + n.to_bytes(4, "big"))
    return head + bytes(body)
