"""RabbitMQ's AMQP 1.0 addresses: what a link's source or target, or a message's ``to``, names.

Version 2 (RabbitMQ 4, its AMQP 1.0 clients)::

    /queues/:queue                  target: the default exchange, routing key :queue; source: the queue
    /exchanges/:exchange            target: the exchange, routing key the message's subject
    /exchanges/:exchange/:key       target: the exchange and key
    (null target)                   anonymous: each message's ``to`` holds a v2 target address

Version 1 (RabbitMQ 3.x's plugin and older clients)::

    /amq/queue/:queue               as /queues/:queue (the queue must exist)
    /queue/:queue                   the queue, declared (durable) when missing; /queue alone: the
                                    default exchange with the subject as key
    /exchange/:exchange/:key        target: the exchange and key; source: a server-named exclusive
                                    queue bound to it with :key
    /exchange/:exchange             target: the exchange, key the subject
    /topic/:key                     /exchange/amq.topic/:key

Names are percent-encoded in v2 addresses (RFC 3986, as RabbitMQ's clients write them). A plain
name (no leading ``/``) is taken as a queue, as RabbitMQ 3.x did.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["Address", "parse_target", "parse_source", "AddressError"]


class AddressError(ValueError):
    """An address this broker cannot serve (answered with ``amqp:invalid-field``)."""


@dataclass(frozen=True)
class Address:
    exchange: str | None  # None for a source reading a queue
    key: str | None  # None: the message's subject is the routing key
    queue: str | None = None  # a queue the link sends to or reads from
    declare: bool = False  # v1 /queue/Q: declared durable when missing
    bind: bool = False  # v1 /exchange/X/K as a source: a temporary queue bound to X with K


def _name(part: str) -> str:
    name = unquote(part, errors="strict")
    if not name and part:
        raise AddressError("empty name")
    return name


def _bare(address: str) -> None:
    """A v1 address without a leading "/" is a queue's name, and has no "/" in it: RabbitMQ 4 reads
    it with rabbit_routing_parser, which refuses "topic://T" or "a/b" as an unknown destination
    (the link refused with amqp:invalid-field), rather than look for a queue of that name."""
    if "/" in address:
        raise AddressError(f"address '{address}' is not one this broker serves (a queue's name has no '/'; "
                           "RabbitMQ's v2 or v1 forms)")


def parse_target(address: str) -> Address:
    """Where messages sent to ``address`` go."""
    if not address.startswith("/"):
        _bare(address)
        return Address("", address, address)
    parts = address[1:].split("/")
    head = parts[0]
    if head == "queues" and len(parts) == 2 and parts[1]:
        q = _name(parts[1])
        return Address("", q, q)
    if head == "exchanges" and len(parts) in (2, 3) and parts[1]:
        return Address(_name(parts[1]), _name(parts[2]) if len(parts) == 3 else None)
    if head == "amq" and len(parts) == 3 and parts[1] == "queue" and parts[2]:
        return Address("", parts[2], parts[2])
    if head == "queue" and len(parts) == 2 and parts[1]:
        return Address("", parts[1], parts[1], declare=True)
    if head == "queue" and len(parts) == 1:
        return Address("", None)
    if head == "exchange" and len(parts) in (2, 3) and parts[1]:
        return Address(parts[1], parts[2] if len(parts) == 3 else None)
    if head == "topic" and len(parts) == 2:
        return Address("amq.topic", parts[1])
    raise AddressError(f"address '{address}' is not one this broker serves (RabbitMQ's v2 or v1 forms)")


def parse_source(address: str) -> Address:
    """Where a link reading from ``address`` takes its messages."""
    if not address.startswith("/"):
        _bare(address)
        return Address(None, None, address)
    parts = address[1:].split("/")
    head = parts[0]
    if head == "queues" and len(parts) == 2 and parts[1]:
        return Address(None, None, _name(parts[1]))
    if head == "amq" and len(parts) == 3 and parts[1] == "queue" and parts[2]:
        return Address(None, None, parts[2])
    if head == "queue" and len(parts) == 2 and parts[1]:
        return Address(None, None, parts[1], declare=True)
    if head == "exchange" and len(parts) == 3 and parts[1]:
        return Address(parts[1], parts[2], bind=True)
    if head == "topic" and len(parts) == 2:
        return Address("amq.topic", parts[1], bind=True)
    raise AddressError(f"address '{address}' cannot be consumed from (RabbitMQ's v2 /queues/Q or the v1 forms)")
