"""A published message as the broker keeps it: the one message container.

**The format.** A message is its exchange, routing key, body and an *encoded AMQP 0-9-1 basic
property list* (two flag octets, then the properties present, in order:
warren/codec/properties.py). Every protocol converts at its edge: a 0-10 transfer's header
(warren/protocol/amqp0_10/properties.py) and a 1.0 message's sections
(warren/protocol/amqp1_0/message.py) become such a list on the way in and are made again from it
on the way out; 0-9-1 and the 0-8 family keep the publisher's octets. The broker asks the list
what it holds through this module (``Message``'s properties; the masks and tests under "What
the broker tests of the flags", below), never through the codec's flag constants: where a test
runs per message of a run of publishes, it stays a bit test of the first two octets against
these masks, since a call would cost each message more than the test.

The property list stays encoded exactly as the publisher sent it and is written back to
consumers unchanged; it is decoded only when something needs a property (headers for the
headers exchange, expiration for TTL); delivery-mode is read straight from the octets. The
exchange and routing key are kept shortstr-encoded as well, ready for basic.deliver.

Memory (bench/memory.py, tracemalloc): a queued message is mostly Python object headers, so
what many messages have in common is shared rather than copied: one str and one encoded
shortstr per distinct exchange or routing key (``_names``), and no decoded properties or
store record kept once they have served (a persistent 16 B message went from 784 to … octets).

Garbage collection: a ``Message`` refers to strings, octets, numbers and its decoded properties,
none of which can refer back to it, so it is never part of a reference cycle, and ``untrack``
(the compiled speedups' ``untrack``, None without them) may take it out of the collector's
sight. A run of publishes does (``BrokerChannel.publish_run``: streaming publishers are what
builds backlogs): queued messages were a large share of what young collections visited
(publish-only under confirms, 1000-octet bodies: about 1,800 of 21,600 instructions per
message, docs/performance.md) and nearly everything a full pass visits. Not in ``__init__``:
a message delivered at once never meets a collection, and the check and call cost a lone
publish about 600 instructions. Subclasses (0-10's ``PublishedMessage`` carries its
connection) are never untracked.
"""

from __future__ import annotations

import struct

from warren.spec.fields import encode_shortstr
from warren.codec.properties import (
    CONTENT_ENCODING_FLAG, CONTENT_TYPE_FLAG, DELIVERY_MODE_FLAG, EXPIRATION_FLAG, HEADERS_FLAG, PRIORITY_FLAG,
    REPLY_TO_FLAG, USER_ID_FLAG, decode_basic_properties,
)
from warren.errors import PreconditionFailed, SyntaxError_
from warren.store.message import encode_message_ss

try:
    from warren.broker._messages import clone_messages as _clone_messages, untrack
except ImportError:  # the pure-Python broker: messages stay tracked, nothing else changes
    untrack = _clone_messages = None

__all__ = ["Message", "clone_messages", "clone_messages_py", "shared_name", "untrack", "HEADERS_HI", "EXPIRATION_HI",
           "PRIORITY_HI", "REPLY_TO_HI", "USER_ID_LO", "PUBLISH_CHECKS_HI", "has_headers", "may_name_cc"]

# name -> (the same name, its shortstr encoding): the first str seen stands for every equal
# one after it, and the encoding is made once. Bounded: cleared when full (routing keys
# unique per message, such as reply queues, would otherwise grow it without end).
_names: dict[str, tuple[str, bytes]] = {}
_NAMES_MAX = 10_000

# --- What the broker tests of the flags -------------------------------------------------------
# Masks of the first flag octet (``properties[0]``, "HI") or the second (``properties[1]``,
# "LO"); a list shorter than two octets has no property.
HEADERS_HI = HEADERS_FLAG >> 8
EXPIRATION_HI = EXPIRATION_FLAG >> 8
PRIORITY_HI = PRIORITY_FLAG >> 8
REPLY_TO_HI = REPLY_TO_FLAG >> 8
USER_ID_LO = USER_ID_FLAG & 0xFF
# what the channel checks when a message is published (BrokerChannel._check_properties):
# reply-to and expiration here, user-id in USER_ID_LO
PUBLISH_CHECKS_HI = EXPIRATION_HI | REPLY_TO_HI
_DELIVERY_MODE_HI = DELIVERY_MODE_FLAG >> 8
_CONTENT_TYPE_HI, _CONTENT_ENCODING_HI = CONTENT_TYPE_FLAG >> 8, CONTENT_ENCODING_FLAG >> 8
_HEADERS_HI = HEADERS_HI


def has_headers(properties) -> bool:
    return len(properties) >= 2 and bool(properties[0] & HEADERS_HI)


def may_name_cc(properties) -> bool:
    """Whether a list with headers may hold ``CC`` or ``BCC`` (sender-selected distribution):
    a test of the octets ("C" first, a memchr), which never says no when they are there; the
    headers are decoded only when it says yes."""
    return 67 in properties and (properties.find(b"\x02CC") >= 0 or properties.find(b"\x03BCC") >= 0)


def shared_name(name: str) -> tuple[str, bytes]:
    """(name, shortstr) with both objects shared by every message that uses this name."""
    hit = _names.get(name)
    if hit is None:
        if len(_names) >= _NAMES_MAX:
            _names.clear()
        hit = _names[name] = (name, encode_shortstr(name))
    return hit


def _delivery_mode(properties: bytes) -> int | None:
    """The delivery-mode octet, found by skipping the three properties before it (content-type,
    content-encoding, headers) by their lengths, without decoding anything. IndexError if the
    list is cut short (the caller then decodes it properly, which reports the error)."""
    hi = properties[0]
    if not hi & _DELIVERY_MODE_HI:
        return None
    off = 2
    if hi & _CONTENT_TYPE_HI:  # shortstr
        off += 1 + properties[off]
    if hi & _CONTENT_ENCODING_HI:  # shortstr
        off += 1 + properties[off]
    if hi & _HEADERS_HI:  # table: a long size, then that many octets
        off += 4 + int.from_bytes(properties[off:off + 4], "big")
    return properties[off]


class Message:
    __slots__ = ("exchange", "routing_key", "properties", "body", "_decoded", "exchange_ss", "routing_key_ss",
                 "ttl", "persistent", "_record")
    # the connection a message came from, for Qpid's no-local queues: only a message published
    # over 0-10 (its PublishedMessage subclass, a slot) records one
    publisher = None

    def __init__(self, exchange: str, routing_key: str, properties: bytes, body) -> None:
        self.properties = properties  # encoded flags + property list
        self.body = body
        self._decoded = None  # the decoded BasicProperties, once asked
        names = _names
        hit = names.get(exchange)  # shared_name, inline: this runs for every message
        self.exchange, self.exchange_ss = hit if hit is not None else shared_name(exchange)
        hit = names.get(routing_key)
        self.routing_key, self.routing_key_ss = hit if hit is not None else shared_name(routing_key)
        self.ttl: float | None = None  # seconds, from the expiration property (check_expiration)
        persistent = False
        if len(properties) >= 2 and properties[0] & _DELIVERY_MODE_HI:
            try:
                persistent = _delivery_mode(properties) == 2
            except IndexError:
                persistent = self.decoded.delivery_mode == 2  # raises the 502 for a cut list
        self.persistent = persistent
        self._record: bytes | None = None

    @property
    def record(self) -> bytes:
        """The message as a store record (encoded once, shared by every queue it goes to)."""
        r = self._record
        if r is None:
            r = self._record = encode_message_ss(self.exchange_ss, self.routing_key_ss, self.properties, self.body)
        return r

    def routed(self) -> None:
        """Every queue has it: the store record was shared by them and is not needed any more
        (a paged-out message encodes it again)."""
        self._record = None

    def check_expiration(self) -> None:
        """Parse the expiration property (a decimal string of milliseconds); 406 if invalid."""
        exp = self.decoded.expiration
        if exp is None:
            return
        if not exp.isdigit() or not exp.isascii():
            raise PreconditionFailed(f"invalid expiration '{exp}'")
        self.ttl = int(exp) / 1000

    @property
    def decoded(self):
        """The decoded basic properties, a 0-9-1 ``BasicProperties`` (cached; raises on a malformed
        property list)."""
        p = self._decoded
        if p is None:
            try:
                p = decode_basic_properties(self.properties)
            except (IndexError, ValueError, struct.error, RecursionError, OverflowError) as e:
                raise SyntaxError_(f"malformed content properties: {e}", 60, 40) from None
            self._decoded = p
        return p

    @property
    def headers(self) -> dict:
        return self.decoded.headers or {}

    def __len__(self) -> int:
        return len(self.body)

    def __repr__(self) -> str:
        return f"<Message {self.exchange!r}/{self.routing_key!r} {len(self.body)} octets>"


def clone_messages_py(template: Message, properties: list, bodies: list) -> list[Message] | None:
    """The Messages of a run of publishes with one exchange and routing key
    (``BrokerChannel.publish_run``): ``template``, which the caller built from the first
    publish with ``Message(...)``, then for each further (properties[i], bodies[i]) a copy of
    template's slots with its own property list, body and ``persistent``. Every one untracked
    when ``untrack`` exists. None when a property list after the first is cut short: the caller
    builds them one by one then, and ``Message`` reports it where it is. One ``__init__`` per
    run instead of per message: its name lookups are the same for all.

    ``clone_messages`` is this function compiled (``_messages.c``, the same answers; tested
    against this one in tests/protocol/test_speedups.py), or this one without the extension."""
    cls = type(template)
    out = [template]
    for props, body in zip(properties[1:], bodies[1:]):
        try:
            persistent = len(props) >= 2 and bool(props[0] & _DELIVERY_MODE_HI) and _delivery_mode(props) == 2
        except IndexError:
            return None
        msg = cls.__new__(cls)
        for name in cls.__slots__:
            try:
                setattr(msg, name, getattr(template, name))
            except AttributeError:  # a slot the template never set
                pass
        msg.properties, msg.body, msg.persistent = props, body, persistent
        out.append(msg)
    if untrack is not None:
        for msg in out:
            untrack(msg)
    return out


clone_messages = _clone_messages or clone_messages_py
