"""Batches of messages handed from one worker process to the worker that owns their queue.

Why: in the queue-owning worker design (docs/performance.md, "Next: queue-owning workers")
the worker that parsed and routed a publish hands the message to the worker owning the
queue, batched per event-loop turn. With the store record as the wire format the owner spent
5.3 µs per 16 B message reading, decoding it field by field in Python and building the
``Message`` (``bench/worker_transfer.py``), more than a whole publish costs in one process.
This format is laid out so that the owner needs one compiled call per batch, which returns
the queue's ``Message`` objects ready made (``take_batch``), and the sender one compiled call
per batch that reads its ``Message`` objects (``encode_batch``).

What repeats is sent once per batch: names (exchange, routing key, vhost, queue names), the
property lists (most publishers send the same one every time) and destinations. Each message
is then a fixed 9-octet head, its TTL when it has one, and its body:

    batch        u32 size (octets after this field), then:
                 u8 version (1), u8 reserved (0), u16 names, u16 property lists,
                 u16 destinations, u32 messages, u64 first ticket
    name         u8 length, octets (a shortstr: what ``Message.exchange_ss`` holds)
    properties   u32 length, octets (flags + list, exactly as the publisher sent them)
    destination  u16 vhost name, u16 count (1 or more), count x u16 queue name
    message      u8 flags, u16 exchange name, u16 routing-key name, u16 properties,
                 u16 destination, [u64 TTL in ms when flags has TTL], u32 body length, body

All integers are big-endian; every index refers to a table of the same batch. Flags:
``PERSISTENT`` (delivery-mode 2, as the publisher's ``Message`` found it), ``MANDATORY`` (the
owner answers "no queue took it" if the queue went away meanwhile) and ``TTL`` (the message's
expiration, already checked by the publisher). Tickets: the i-th message of a batch has ticket
``first_ticket + i``; the sender numbers what it sends to one owner consecutively and keeps what
each ticket stands for (channel, publish sequence), so the owner's answers (enqueued, refused,
synced: a number, as the group commit already counts) need no per-message identity in the batch.

Reading (``take_batch``, the compiled twin when built): None while the batch at ``pos`` is
incomplete (wait for more octets), ValueError for a batch that is complete but malformed (an
index out of its table, a length past the end, unknown flags, octets left over): peers are
Warren workers, so that is a bug, reported clearly, never an over-read. The items are instances
of ``cls`` built without calling ``__init__`` (the slots set directly, the names shared through
``resolve_name``), or, with ``cls`` None, (exchange, routing_key, properties, body, ttl) tuples.

Both sides are sans-IO: bytes in, bytes out; the rings or sockets between workers are not here.
"""

from __future__ import annotations

import struct

__all__ = ["PERSISTENT", "MANDATORY", "TTL", "VERSION", "MESSAGE_SLOTS", "encode_batch", "encode_batch_py",
           "take_batch", "take_batch_py", "plain_name"]

VERSION = 1
PERSISTENT, MANDATORY, TTL = 0x01, 0x02, 0x04
_KNOWN_FLAGS = PERSISTENT | MANDATORY | TTL

_SIZE = struct.Struct(">I")
_HEAD = struct.Struct(">BBHHHIQ")  # version, reserved, names, property lists, destinations, messages, first ticket
_MESSAGE = struct.Struct(">BHHHH")  # flags, exchange, routing key, properties, destination
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_TABLE_MAX = 0xFFFF
_MESSAGE_MIN = _MESSAGE.size + 4  # a message without TTL and body
_INF = float("inf")

# the slots take_batch sets on each item of cls, in this order (Message's names)
MESSAGE_SLOTS = ("exchange", "exchange_ss", "routing_key", "routing_key_ss", "properties", "body", "persistent",
                 "ttl")


def plain_name(shortstr: bytes) -> tuple[str, bytes]:
    """(name, shortstr) for a name's shortstr octets: what ``take_batch`` uses without a
    ``resolve_name`` (the broker passes one that shares equal names, ``message.shared_name``)."""
    return str(shortstr[1:], "utf-8", "surrogateescape"), shortstr


def _ttl_ms(ttl: float) -> int:
    """A Message's ttl (seconds, ``int(expiration) / 1000``) as the expiration's milliseconds."""
    ms = float(ttl) * 1000
    if ms != ms or ms in (_INF, -_INF) or not 0 <= round(ms) < 2 ** 64:
        raise ValueError("ttl out of range")
    return round(ms)


def encode_batch_py(first_ticket: int, messages, destinations, mandatory=None) -> bytes:
    """One batch (module doc) of ``messages``, objects with a Message's ``exchange_ss``,
    ``routing_key_ss``, ``properties``, ``body``, ``persistent`` and ``ttl``. ``destinations[i]``
    is where message i goes: (vhost, (queue name, ...)) with str names; ``mandatory`` None (no
    message is) or one truth value per message. ValueError when a table would pass 65,535
    entries (the sender then sends the messages in two batches) or a name 255 octets."""
    n = len(messages)
    if len(destinations) != n or (mandatory is not None and len(mandatory) != n):
        raise ValueError("messages, destinations and mandatory must have the same length")
    names: dict[bytes, int] = {}
    props: dict[bytes, int] = {}
    dests: dict = {}
    name_parts: list[bytes] = []
    prop_parts: list[bytes] = []
    dest_parts: list[bytes] = []
    out: list = []

    def name_index(ss: bytes) -> int:
        i = names.get(ss)
        if i is None:
            if not ss or len(ss) != 1 + ss[0]:
                raise ValueError("a name must be a shortstr (its length octet first)")
            i = names[ss] = _next_index(names)
            name_parts.append(ss)
        return i

    for i, msg in enumerate(messages):
        dest = destinations[i]
        d = dests.get(dest)
        if d is None:
            vhost, queues = dest
            if not queues or len(queues) > _TABLE_MAX:
                raise ValueError("a destination names 1 to 65535 queues")
            head = [_U16.pack(name_index(_shortstr(vhost))), _U16.pack(len(queues))]
            head += [_U16.pack(name_index(_shortstr(q))) for q in queues]
            d = dests[dest] = _next_index(dests)
            dest_parts.append(b"".join(head))
        p = props.get(msg.properties)
        if p is None:
            p = props[msg.properties] = _next_index(props)
            prop_parts.append(_U32.pack(len(msg.properties)) + bytes(msg.properties))
        flags = PERSISTENT if msg.persistent else 0
        if mandatory is not None and mandatory[i]:
            flags |= MANDATORY
        ttl = msg.ttl
        if ttl is not None:
            flags |= TTL
        out.append(_MESSAGE.pack(flags, name_index(msg.exchange_ss), name_index(msg.routing_key_ss), p, d))
        if ttl is not None:
            out.append(_U64.pack(_ttl_ms(ttl)))
        body = msg.body
        if type(body) is not bytes:  # a bytearray or memoryview: its octets, as the compiled twin takes them
            body = bytes(body)
        out.append(_U32.pack(len(body)))
        out.append(body)
    head = _HEAD.pack(VERSION, 0, len(names), len(props), len(dests), n, first_ticket)
    payload = b"".join((head, *name_parts, *prop_parts, *dest_parts, *out))
    return _SIZE.pack(len(payload)) + payload


def _next_index(table: dict) -> int:
    if len(table) >= _TABLE_MAX:
        raise ValueError("more than 65535 distinct names, property lists or destinations in one batch")
    return len(table)


def _shortstr(name: str) -> bytes:
    b = name.encode("utf-8", "surrogateescape")
    if len(b) > 255:
        raise ValueError("name longer than 255 octets")
    return bytes((len(b),)) + b


class _Cut(Exception):
    """A read past the end of the batch (reported as ValueError)."""


def _need(end: int, off: int, n: int) -> None:
    if end - off < n:
        raise _Cut


def take_batch_py(buf, pos: int, cls=None, defaults=(), resolve_name=None, resolve_destination=None,
                  untrack: bool = False):
    """None | (items, destinations, flags, first_ticket, next_pos): the batch at ``buf[pos:]``
    (module doc). ``destinations[i]`` is what ``resolve_destination(vhost, queue_names)`` gave
    for message i's destination (without one: the (vhost, queue_names) tuple), called once per
    destination of the batch; ``flags`` a bytes object, octet i message i's flags. With ``cls``
    each item is ``cls.__new__(cls)`` with ``MESSAGE_SLOTS`` and every (slot, value) of
    ``defaults`` set; ``untrack`` (the compiled path only) takes the items out of the garbage
    collector's sight (for a class whose objects cannot be in a cycle, ``Message``)."""
    avail = len(buf) - pos
    if pos < 0 or avail < 4:
        return None
    (size,) = _SIZE.unpack_from(buf, pos)
    if avail - 4 < size:
        return None
    off, end = pos + 4, pos + 4 + size
    try:
        _need(end, off, _HEAD.size)
        version, reserved, n_names, n_props, n_dests, n_messages, first_ticket = _HEAD.unpack_from(buf, off)
        if version != VERSION or reserved:
            raise ValueError(f"handover batch: version {version} (reserved {reserved}), this worker reads "
                             f"version {VERSION}")
        off += _HEAD.size
        resolve = resolve_name or plain_name
        names = []
        for _ in range(n_names):
            _need(end, off, 1)
            n = buf[off]
            _need(end, off, 1 + n)
            names.append(_resolved(resolve(bytes(buf[off:off + 1 + n]))))
            off += 1 + n
        props = []
        for _ in range(n_props):
            _need(end, off, 4)
            (n,) = _U32.unpack_from(buf, off)
            _need(end, off + 4, n)
            props.append(bytes(buf[off + 4:off + 4 + n]))
            off += 4 + n
        dests = []
        for _ in range(n_dests):
            _need(end, off, 4)
            vhost, count = struct.unpack_from(">HH", buf, off)
            off += 4
            if count == 0:
                raise ValueError("handover batch: a destination names no queue")
            _need(end, off, 2 * count)
            queues = struct.unpack_from(f">{count}H", buf, off)
            off += 2 * count
            if vhost >= n_names or max(queues) >= n_names:
                raise ValueError("handover batch: a destination refers past the name table")
            vhost_name, queue_names = names[vhost][0], tuple(names[q][0] for q in queues)
            dests.append(resolve_destination(vhost_name, queue_names) if resolve_destination is not None
                         else (vhost_name, queue_names))
        if n_messages > (end - off) // _MESSAGE_MIN:
            raise _Cut
        items, item_dests, flags = [], [], bytearray()
        for _ in range(n_messages):
            _need(end, off, _MESSAGE.size)
            f, ex, rk, p, d = _MESSAGE.unpack_from(buf, off)
            off += _MESSAGE.size
            if f & ~_KNOWN_FLAGS:
                raise ValueError(f"handover batch: unknown message flags 0x{f:02x}")
            if ex >= n_names or rk >= n_names or p >= n_props or d >= n_dests:
                raise ValueError("handover batch: a message refers past its batch's tables")
            ttl = None
            if f & TTL:
                _need(end, off, 8)
                ttl = _U64.unpack_from(buf, off)[0] / 1000
                off += 8
            _need(end, off, 4)
            (n,) = _U32.unpack_from(buf, off)
            _need(end, off + 4, n)
            body = bytes(buf[off + 4:off + 4 + n])
            off += 4 + n
            exchange, routing_key = names[ex], names[rk]
            if cls is None:
                items.append((exchange[0], routing_key[0], props[p], body, ttl))
            else:
                obj = cls.__new__(cls)
                for slot, value in zip(MESSAGE_SLOTS, (exchange[0], exchange[1], routing_key[0], routing_key[1],
                                                       props[p], body, bool(f & PERSISTENT), ttl)):
                    setattr(obj, slot, value)
                for slot, value in defaults:
                    setattr(obj, slot, value)
                items.append(obj)
            item_dests.append(dests[d])
            flags.append(f)
    except _Cut:
        raise ValueError("handover batch: a table or message runs past the end of its batch") from None
    if off != end:
        raise ValueError(f"handover batch: {end - off} octets after the last message")
    return items, item_dests, bytes(flags), first_ticket, end


def _resolved(pair) -> tuple:
    """resolve_name's answer, checked as the compiled path checks it."""
    if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str:
        raise TypeError("resolve_name must return a (str, shortstr) tuple")
    return pair


try:
    from warren.codec._speedups import encode_handover as _encode_c, take_handover as _take_c
except ImportError:  # no compiler where Warren was installed: the Python twins
    _encode_c = _take_c = None


if _take_c is not None:
    def encode_batch(first_ticket: int, messages, destinations, mandatory=None) -> bytes:
        """``encode_batch_py``, compiled (one call per batch)."""
        return _encode_c(first_ticket, messages, destinations, mandatory)

    def take_batch(buf, pos: int, cls=None, defaults=(), resolve_name=None, resolve_destination=None,
                   untrack: bool = False):
        """``take_batch_py``, compiled (one call per batch; ``untrack`` honoured)."""
        return _take_c(buf, pos, cls, defaults, resolve_name, resolve_destination, untrack)
else:
    encode_batch, take_batch = encode_batch_py, take_batch_py
