"""The part of routing every exchange type shares.

A type only stores its bindings and answers ``match(routing_key, message)`` with the queues and
exchanges it routes to (``Destination``s); a type that needs every routing key at once
(consistent hash: the first one only) overrides ``match_keys``. Everything else is here, the
first three with RabbitMQ's semantics (``rabbit_exchange:route``), the last with LavinMQ's:

* **Exchange-to-exchange bindings** are followed with a visited set, so a cycle of bindings
  delivers once and terminates.
* **Sender-selected distribution**: the ``CC`` and ``BCC`` headers (arrays; their longstr
  elements count) add routing keys for the whole route; ``BCC`` is then cut out of the
  property list (``warren/codec/property_edits.py``), so no consumer sees it. Any other type of
  value is 406 "invalid message".
* **Alternate exchange** (argument ``alternate-exchange``): an exchange whose own ``match``
  found no destination at all hands the message to its AE, which may have an AE of its own;
  the visited set makes AE cycles (and AE chains through e2e bindings) finite. An AE that does
  not exist is skipped. The publisher sees ``basic.return`` only when nothing routes, AEs
  included.
* **Deduplication** (``x-message-deduplication``, ``warren/broker/dedup.py``): an exchange that
  has seen the message's key routes it nowhere, and does not use its AE for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Collection, Iterable

from warren.broker.dedup import check_arguments, from_arguments
from warren.broker.message import HEADERS_HI, may_name_cc
from warren.codec.property_edits import remove_header
from warren.errors import PreconditionFailed

if TYPE_CHECKING:
    from warren.broker.message import Message
    from warren.broker.queues.base import QueueBase

__all__ = ["Binding", "Exchange", "freeze"]


class Binding:
    """source --routing_key/arguments--> destination (a queue, ``QueueBase``, or an Exchange)."""

    __slots__ = ("source", "destination", "routing_key", "arguments")

    def __init__(self, source: "Exchange", destination, routing_key: str, arguments: dict) -> None:
        self.source = source
        self.destination = destination
        self.routing_key = routing_key
        self.arguments = arguments

    @property
    def key(self) -> tuple:
        return (id(self.destination), self.routing_key, freeze(self.arguments))


def freeze(value):
    """A JSON-like value (arguments) as nested tuples: hashable, equal when the values are equal."""
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


class Exchange:
    TYPE = ""
    stats_publish_in = 0  # messages published to it (the HTTP API's message_stats; Channel counts)

    def __init__(self, name: str, durable: bool = False, auto_delete: bool = False,
                 internal: bool = False, arguments: dict | None = None) -> None:
        self.name = name
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments = arguments or {}
        self.bindings: dict[tuple, Binding] = {}  # every binding whose source is this exchange
        self.bound_to: set["Binding"] = set()  # bindings whose destination is this exchange
        self.vhost = None  # the VirtualHost, once attached (alternate-exchange lookups)
        ae = self.arguments.get("alternate-exchange")
        if ae is not None and not isinstance(ae, str):
            raise PreconditionFailed(f"invalid type '{_type_name(ae)}' for arg 'alternate-exchange' in "
                                     f"exchange '{name}'")
        check_arguments(self.arguments, "exchange", name)
        self.effective: dict = {}
        self.alternate: str | None = None
        self.exchange_bindings = 0  # bindings whose destination is an exchange (routing fast path)
        self.dedup = None
        self.apply_arguments(self.arguments)

    def apply_arguments(self, effective: dict) -> None:
        """Use these effective arguments (declared + policy, ``warren/broker/policies.py``): the
        alternate exchange and deduplication. Called at creation, on attach and when policies
        change; the deduplication cache starts again only when its settings change."""
        old, self.effective = self.effective, effective
        ae = effective.get("alternate-exchange")
        self.alternate = ae if isinstance(ae, str) else None
        if self.dedup is None or any(old.get(k) != effective.get(k) for k in _DEDUP_ARGS):
            self.dedup = from_arguments(effective)

    # --- life cycle (called by the VirtualHost) ----------------------------------------------

    def attach(self, vhost) -> None:
        """The exchange joined ``vhost`` (declared or restored): its policy applies from now."""
        self.vhost = vhost
        eff = vhost.effective_arguments("exchange", self.name, self.arguments)
        if eff != self.effective:
            self.apply_arguments(eff)

    def detach(self) -> None:
        """The exchange was deleted."""

    # --- bindings (a type overrides _add/_remove to index them) ----------------------------

    def check_binding(self, arguments: dict) -> None:
        """Refuse binding arguments this type cannot use (raise an AMQPError)."""

    def check_key(self, routing_key: str) -> None:
        """Refuse a binding key this type cannot use (raise an AMQPError)."""

    def check_destination(self, destination) -> None:
        """Refuse a destination (a queue or its handle, an Exchange) this type cannot route to."""

    def bind(self, destination, routing_key: str, arguments: dict) -> bool:
        self.check_binding(arguments)
        self.check_key(routing_key)
        self.check_destination(destination)
        b = Binding(self, destination, routing_key, arguments)
        if b.key in self.bindings:
            return False
        self.bindings[b.key] = b
        self._add(b)
        destination.bound_to.add(b)
        if isinstance(destination, Exchange):
            self.exchange_bindings += 1
        return True

    def unbind(self, destination, routing_key: str, arguments: dict) -> bool:
        b = self.bindings.pop(Binding(self, destination, routing_key, arguments).key, None)
        if b is None:
            return False
        self._forget(b)
        return True

    def remove_binding(self, b: Binding) -> None:
        if self.bindings.pop(b.key, None) is not None:
            self._forget(b)

    def _forget(self, b: Binding) -> None:
        self._remove(b)
        b.destination.bound_to.discard(b)
        if isinstance(b.destination, Exchange):
            self.exchange_bindings -= 1

    def _add(self, b: Binding) -> None:
        raise NotImplementedError

    def _remove(self, b: Binding) -> None:
        raise NotImplementedError

    def match(self, routing_key: str, message: "Message") -> Iterable:
        """Destinations (queues or exchanges) for this key and message, duplicates allowed."""
        raise NotImplementedError

    # match() looks at the routing key alone, never the message (direct, fanout, topic, default)
    KEY_ROUTED = False

    def run_destinations(self, routing_key: str) -> "Collection[QueueBase] | None":
        """What ``route`` gives every message published here with this one routing key and no
        CC/BCC headers, when that depends on the key alone: a run of publishes
        (``BrokerChannel.publish_run``) routes once. None when it depends on the message
        (the exchange type, deduplication, exchange-to-exchange bindings) or when no queue
        is bound (alternate exchange, mandatory returns): route each message then."""
        if not self.KEY_ROUTED or self.dedup is not None or self.exchange_bindings:
            return None
        dests = self.match(routing_key, None)
        if not dests:
            return None
        if len(dests) == 1:
            return dests if type(dests) is tuple else (dests[0],)
        return set(dests)

    def match_keys(self, routing_keys, message: "Message") -> Iterable:
        """Destinations for a message with several routing keys (CC/BCC): the union by default."""
        out: list = []
        for key in routing_keys:
            out.extend(self.match(key, message))
        return out

    # --- routing -------------------------------------------------------------------------

    def route(self, message: "Message", routing_keys) -> "Collection[QueueBase]":
        """The queues a message published here reaches (see the module docstring)."""
        props = message.properties
        # decode only when the property octets hold the names (67 is "C": a cheap memchr first)
        if len(props) >= 2 and props[0] & HEADERS_HI and may_name_cc(props):
            routing_keys = sender_selected(message, routing_keys)
        elif len(routing_keys) == 1 and self.dedup is None and not self.exchange_bindings:
            # route_keys' fast path, inline: one call less for nearly every publish
            dests = self.match(routing_keys[0], message)
            if dests:
                if len(dests) == 1:
                    return dests if type(dests) is tuple else (dests[0],)
                return set(dests)
            if self.alternate is None:
                return _NO_QUEUES
        return self.route_keys(message, routing_keys)

    def enqueue(self, message: "Message") -> tuple[int, int]:
        """Route by the message's routing key and enqueue it on every queue reached, for a
        publisher that is no client's channel (the HTTP API's publish, a dtx commit another
        worker passed on); ``BrokerChannel._route`` does the same inline with what a channel
        adds (returns, flow control). (queues reached, the sync number its durability waits for)."""
        queues = self.route(message, (message.routing_key,))
        need = 0
        for q in queues:
            need = max(need, q.publish(message))
        if message.persistent:
            message.routed()
        return len(queues), need

    def route_keys(self, message: "Message", routing_keys, dedup: bool = True) -> "Collection[QueueBase]":
        """Route with these keys exactly (CC/BCC already applied); ``dedup=False`` skips this
        exchange's own deduplication (a delayed message it already checked). The queues come
        without duplicates, as a set or (one queue) a tuple: iterate, do not modify."""
        single = routing_keys[0] if len(routing_keys) == 1 else None
        if single is not None and self.dedup is None and not self.exchange_bindings:
            # The common case (one key, only queues bound, no dedup): no sets to build per
            # message (bench/compare.py pubonly-1p, py-spy: routing was ~10 % of publish time).
            dests = self.match(single, message)
            if dests:
                if len(dests) == 1:  # a tuple is cheaper to make than a set; callers only iterate
                    return dests if type(dests) is tuple else (dests[0],)
                return set(dests)  # several bindings may lead to the same queue
            if self.alternate is None:
                return _NO_QUEUES
        queues: set = set()
        visited = {self}
        pending = [self]
        while pending:
            ex = pending.pop()
            if ex.dedup is not None and (dedup or ex is not self) and ex.dedup.duplicate(message):
                continue
            routed = False
            for dest in (ex.match(single, message) if single is not None else ex.match_keys(routing_keys, message)):
                routed = True
                if isinstance(dest, Exchange):
                    if dest not in visited:
                        visited.add(dest)
                        pending.append(dest)
                else:
                    queues.add(dest)
            if not routed and ex.alternate is not None and ex.vhost is not None:
                ae = ex.vhost.exchanges.get(ex.alternate)
                if ae is not None and ae not in visited:
                    visited.add(ae)
                    pending.append(ae)
        return queues

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


_NO_QUEUES: frozenset = frozenset()
_DEDUP_ARGS = ("x-message-deduplication", "x-cache-size", "x-cache-ttl", "x-deduplication-header")
_SENDER_SELECTED = ("CC", "BCC")


def sender_selected(message: "Message", routing_keys) -> tuple:
    """The routing keys plus those of the CC and BCC headers; strips BCC from the message.

    RabbitMQ (``rabbit_basic:header_routes``): the header must be an array, and its longstr
    elements are the keys; any other type of header is refused.
    """
    headers = message.headers
    extra: list[str] = []
    for name in _SENDER_SELECTED:
        if name not in headers:
            continue
        value = headers[name]
        if not isinstance(value, list):
            raise PreconditionFailed(f'invalid message: {{unacceptable_type_in_header,"{name}",'
                                     f"{_type_name(value)}}}", 60, 40)
        extra.extend(v for v in value if isinstance(v, str))
    if "BCC" in headers:
        message.properties = remove_header(message.properties, "BCC")
        message._decoded = None
        message._record = None
    if not extra:
        return tuple(routing_keys)
    return (*routing_keys, *dict.fromkeys(k for k in extra if k not in routing_keys))


def _type_name(value) -> str:
    """RabbitMQ's name for a field value's type, as its error messages show it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "signedint" if -(2**31) <= value < 2**31 else "long"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    if isinstance(value, float):
        return "double"
    if value is None:
        return "void"
    return type(value).__name__
