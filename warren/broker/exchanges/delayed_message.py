"""Delayed-message exchange (type ``x-delayed-message``): RabbitMQ's plugin of that name.

Declared with the argument ``x-delayed-type``, the exchange type whose routing it copies
(direct, topic, ... ; missing or not a string: 406, an unknown type: 503 as for any unknown
exchange type). The bindings belong to that inner type. A message with an ``x-delay`` header
of 1 .. 2^32-1 ms (an integer; a decimal string or a float is converted, as the plugin does)
is held, and routed through this exchange when it is due; any other message is routed at once.

As in the plugin, a held message's ``x-delay`` header becomes its negation, so when it is
routed (through e2e bindings to another delayed exchange, too) it is not delayed again, and
consumers can tell how long it waited. Routing happens at the due time, against the bindings
of that moment; the alternate exchange applies then too. Precision is the broker's tick
(``warren/broker/broker.py``).

Unlike the plugin, a held message counts as routed: a mandatory publish is not returned (the
plugin returns every delayed message marked mandatory, since it cannot know the future
routes). A publisher confirm is sent once the message is held, for a persistent message on a
durable exchange once it is on disk.

Durability: a durable exchange keeps its persistent held messages in a store of its own
(``Durability.open_delayed_store``, ``data/delayed/<sha256>/``); each record is the due time
(wall clock, ms since the epoch), the routing keys (CC/BCC included) and the message. At
start-up they are read back and re-armed; those that fell due while the broker was down are
routed at the first tick. A record is acked once the message has been routed and the queue
stores holding it are synced, so a crash in between can deliver it twice but never lose it.
Transient messages, and all messages of a transient exchange, are held in memory only.
"""

from __future__ import annotations

import decimal
import heapq
import logging
import struct
import time

from warren.broker.exchanges.base import Exchange
from warren.broker.message import Message, has_headers
from warren.spec.fields import encode_value
from warren.codec.property_edits import replace_header
from warren.errors import CommandInvalid, PreconditionFailed
from warren.store.message import decode_restored

__all__ = ["DelayedMessageExchange", "MAX_DELAY_MS"]

log = logging.getLogger("warren.delayed")

MAX_DELAY_MS = 2**32 - 1  # the plugin's limit (Erlang's longest timer); longer: not delayed
_X_DELAY = b"\x07x-delay"  # the header's name as a shortstr, for a cheap first look
_HEAD = struct.Struct(">QH")  # due (ms since the epoch), number of routing keys
_KEY = struct.Struct(">H")


def delay_of(message) -> int | None:
    """The delay (ms) asked for by the ``x-delay`` header, or None: route at once."""
    props = message.properties
    if not has_headers(props) or _X_DELAY not in props:
        return None
    value = message.headers.get("x-delay")
    if isinstance(value, bool):
        return None
    if isinstance(value, (str, bytes)):
        try:
            value = int(value)
        except ValueError:
            return None
    elif isinstance(value, (float, decimal.Decimal)):
        value = int(value)
    if isinstance(value, int) and 0 < value <= MAX_DELAY_MS:
        return value
    return None


def _encode(due_ms: int, keys, record: bytes) -> bytes:
    parts = [_HEAD.pack(due_ms, len(keys))]
    for k in keys:
        b = k.encode("utf-8", "surrogateescape")
        parts.append(_KEY.pack(len(b)))
        parts.append(b)
    parts.append(record)
    return b"".join(parts)


def _decode(data) -> tuple[int, tuple, Message]:
    due_ms, n = _HEAD.unpack_from(data, 0)
    off = _HEAD.size
    keys = []
    for _ in range(n):
        (size,) = _KEY.unpack_from(data, off)
        off += 2
        keys.append(bytes(data[off:off + size]).decode("utf-8", "surrogateescape"))
        off += size
    exchange, routing_key, properties, body = decode_restored(data[off:])
    return due_ms, tuple(keys), Message(exchange, routing_key, properties, body)


class _Hold:
    """The destination a delayed message is routed to: publishing it holds the message."""

    __slots__ = ("exchange", "keys", "delay")
    congested = False  # a held message never fills a queue: no flow control from here (queues/flow_marks.py)

    def __init__(self, exchange: "DelayedMessageExchange", keys, delay: int) -> None:
        self.exchange = exchange
        self.keys = tuple(keys)
        self.delay = delay

    def publish(self, message: Message) -> int:
        return self.exchange.hold(message, self.keys, self.delay)


class DelayedMessageExchange(Exchange):
    TYPE = "x-delayed-message"

    def __init__(self, name: str, durable: bool = False, auto_delete: bool = False,
                 internal: bool = False, arguments: dict | None = None) -> None:
        super().__init__(name, durable, auto_delete, internal, arguments)
        from warren.broker.exchanges import EXCHANGE_TYPES  # the registry imports this module

        inner_type = self.arguments.get("x-delayed-type")
        if not isinstance(inner_type, str):
            raise PreconditionFailed("Invalid argument, 'x-delayed-type' must be an existing exchange type")
        cls = EXCHANGE_TYPES.get(inner_type)
        if cls is None or cls is DelayedMessageExchange:
            raise CommandInvalid(f"invalid exchange type '{inner_type}'")
        inner_args = {k: v for k, v in self.arguments.items()
                      if k not in ("alternate-exchange", "x-message-deduplication")}
        self.inner: Exchange = cls(name, durable, auto_delete, internal, inner_args)
        self._heap: list = []  # (due monotonic, seq, routing keys, message, stored)
        self._seq = 0
        self._store = None  # the QueueStore of a durable exchange (persistent messages)
        self._acks: list[tuple[int, int]] = []  # (sync number, seq): ack once that sync is done

    # --- bindings belong to the inner type ----------------------------------------------------

    def check_binding(self, arguments: dict) -> None:
        self.inner.check_binding(arguments)

    def check_key(self, routing_key: str) -> None:
        self.inner.check_key(routing_key)

    def check_destination(self, destination) -> None:
        self.inner.check_destination(destination)

    def _add(self, b) -> None:
        self.inner._add(b)

    def _remove(self, b) -> None:
        self.inner._remove(b)

    def match(self, routing_key, message):
        delay = delay_of(message)
        if delay is None:
            return self.inner.match(routing_key, message)
        return (_Hold(self, (routing_key,), delay),)

    def match_keys(self, routing_keys, message):
        delay = delay_of(message)
        if delay is None:
            return self.inner.match_keys(routing_keys, message)
        return (_Hold(self, routing_keys, delay),)

    # --- holding ------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        return len(self._heap)

    def hold(self, message: Message, keys: tuple, delay: int) -> int:
        """Keep a copy of ``message`` until it is due; returns the sync number it waits for."""
        props = replace_header(message.properties, "x-delay", encode_value(-delay))
        held = Message(message.exchange, message.routing_key, props, message.body)
        held.ttl = message.ttl
        self._seq += 1
        need = 0
        if self._store is not None and held.persistent:
            due_ms = int(time.time() * 1000) + delay
            self._store.append(self._seq, _encode(due_ms, keys, held.record))
            need = self.vhost.durability.wrote(self._store)
        heapq.heappush(self._heap, (time.monotonic() + delay / 1000, self._seq, keys, held, need > 0))
        self._arm()
        return need

    def _arm(self) -> None:
        if self.vhost is not None:
            self.vhost.timers.add(self)

    def tick(self, now: float) -> bool:
        """Route what is due; returns whether there is more to wait for."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, keys, msg, stored = heapq.heappop(heap)
            need = 0
            for q in self.route_keys(msg, keys, dedup=False):
                n = q.publish(msg)
                if isinstance(n, int) and n > need:
                    need = n
            if stored:
                self._acks.append((need, seq))
        if self._acks:
            self._release_acks()
        return bool(heap or self._acks)

    def _release_acks(self) -> None:
        store = self._store
        if store is None:
            self._acks.clear()
            return
        synced = self.vhost.durability.synced
        keep = []
        for need, seq in self._acks:
            if need <= synced:
                store.ack(seq)
            else:
                keep.append((need, seq))
        if len(keep) < len(self._acks):
            self.vhost.durability.wrote(store)
        self._acks = keep

    # --- life cycle ---------------------------------------------------------------------------

    def attach(self, vhost) -> None:
        super().attach(vhost)
        self.inner.vhost = vhost
        durability = vhost.durability
        if not self.durable or durability is None:
            return
        self._store = store = durability.open_delayed_store(vhost.name, self.name, self._before_close)
        self._seq = store.last_seq
        now_ms, now = time.time() * 1000, time.monotonic()
        restored = 0
        for seq, _ in store.unacked():
            try:
                due_ms, keys, msg = _decode(store.read(seq))
            except Exception:
                log.exception("delayed message %d of exchange %r is unreadable; dropped", seq, self.name)
                store.ack(seq)
                continue
            try:
                msg.check_expiration()
            except Exception:
                pass  # it was valid when published
            heapq.heappush(self._heap, (now + (due_ms - now_ms) / 1000, seq, keys, msg, True))
            restored += 1
        if restored:
            log.info("exchange %r in vhost %r: %d delayed messages recovered", self.name, vhost.name, restored)
            self._arm()

    def _before_close(self) -> None:
        """Shutdown: the queue stores are synced, so every routed message may be acked."""
        for _, seq in self._acks:
            self._store.ack(seq)
        self._acks.clear()

    def detach(self) -> None:
        self._heap.clear()
        self._acks.clear()
        if self.vhost is not None:
            self.vhost.timers.discard(self)
            if self._store is not None:
                self.vhost.durability.delete_side_store(self._store)
                self._store = None
