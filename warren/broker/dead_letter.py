"""Dead-lettering: a message leaves a queue for its dead-letter exchange, with its history.

A queue with ``x-dead-letter-exchange`` dead-letters messages rejected or nacked without
requeue (reason ``rejected``), expired (``expired``), dropped or refused by a length limit
(``maxlen``) and returned more often than ``x-delivery-limit`` allows (``delivery_limit``).
Everything here copies RabbitMQ 3.10 (``rabbit_dead_letter.erl``), checked against it:

* The message is re-published to the DLX with the routing key ``x-dead-letter-routing-key``
  (the ``CC`` header is then removed) or else with all its original routing keys (its key and
  ``CC``). A DLX that does not exist drops the message silently. Dead-lettering is not
  confirmed to anyone and a queue refusing it (``reject-publish``) just drops it.
* Headers: ``x-death`` is an array of tables, newest first, one per (queue, reason) with
  ``count`` (``l``), ``reason``, ``queue``, ``time`` (``T``, seconds), ``exchange``,
  ``routing-keys`` and ``original-expiration`` when the message had an ``expiration``; a
  repeat of a (queue, reason) increments its count and moves it to the front, keeping its
  first time. ``x-first-death-queue``/``-reason``/``-exchange`` are set once. RabbitMQ sorts the
  header table by name when it rewrites it; so do we. Entries we do not change are written
  back byte for byte (``RawValue``), so their types survive.
* The ``expiration`` property is removed (it would expire again in the next queue).
* Cycles: unless the reason is ``rejected``, a queue the message already died in is skipped when
  no death since then (that one included) was a rejection: a fully automatic cycle (TTL queues
  dead-lettering into each other) would never end.
"""

from __future__ import annotations

import datetime
import logging

from warren.spec.fields import Long
from warren.codec.properties import decode_basic_properties, salvage_properties, well_formed
from warren.codec.property_edits import header_entries

__all__ = ["dead_letter", "dead_letter_targets", "make_dead_letter", "with_header", "with_headers",
           "REJECTED", "EXPIRED", "MAXLEN", "DELIVERY_LIMIT"]

# the reasons, as RabbitMQ writes them in x-death
REJECTED, EXPIRED, MAXLEN, DELIVERY_LIMIT = "rejected", "expired", "maxlen", "delivery_limit"

log = logging.getLogger("warren.dead_letter")

REJECTED = "rejected"


# a queue argument (True): its dead-letter exchange is an AMQP 0-10 alternate exchange, to
# which messages go unchanged (no x-death), with their own routing key
REROUTE_ARGUMENT = "x-qpid-alternate-exchange"


def dead_letter(queue, messages, reason: str) -> None:
    """Publish ``messages`` (which have left ``queue`` for good) to the queue's DLX."""
    exchange = queue.vhost.exchanges.get(queue.dead_letter_exchange)
    if exchange is None:
        return  # RabbitMQ drops the message when the DLX does not exist
    from warren.broker.message import Message
    if queue.arguments.get(REROUTE_ARGUMENT) is True:
        for msg in messages:
            for q in exchange.route_keys(msg, [msg.routing_key]):
                q.publish(msg)
        return
    for msg in messages:
        try:
            properties, keys, deaths = make_dead_letter(msg, reason, queue.name, queue.dead_letter_routing_key)
        except Exception:  # not for its content (make_dead_letter salvages that): our bug, logged
            log.exception("cannot dead-letter a message from queue %r", queue.name)
            continue
        dl = Message(exchange.name, keys[0], properties, msg.body)
        for q in dead_letter_targets(exchange, dl, keys, deaths, reason):
            q.publish(dl)  # not confirmed to anyone; a queue that refuses it (REFUSED) drops it


def dead_letter_targets(exchange, dl, keys: list, deaths: list, reason: str) -> list:
    """The queues a dead letter goes to, without those that would close a cycle."""
    # the keys already hold CC: route with them exactly (RabbitMQ routes a dead letter
    # with the message's routing keys, alternate exchanges and e2e bindings included)
    out = []
    for q in exchange.route_keys(dl, keys):
        if reason != REJECTED and _is_cycle(q.name, deaths):
            log.debug("dead-letter cycle through queue %r dropped a message (%s)", q.name, reason)
            continue
        out.append(q)
    return out


def make_dead_letter(msg, reason: str, queue_name: str, routing_key: str | None):
    """(encoded properties, routing keys, new x-death list) of ``msg`` dead-lettered from a queue.

    Never fails because of what the message holds (issue 16: a message whose headers did not
    decode vanished from its queue and its DLX alike): a malformed property list, which only a
    data folder from before the edge checked them can hold, is salvaged first (a bad headers
    table becomes an empty one, warren/codec/properties.py) and the loss logged; should the
    rewrite fail all the same, the message goes on with fresh properties, also logged."""
    properties = msg.properties
    if not well_formed(properties):
        properties, dropped = salvage_properties(properties)
        log.warning("a message dead-lettered (%s) from queue %r had a malformed property list; dropped: %s",
                    reason, queue_name, dropped)
    try:
        return _rewrite(msg, properties, reason, queue_name, routing_key)
    except Exception:
        log.exception("cannot rewrite the properties of a message dead-lettered (%s) from queue %r; it goes on "
                      "with fresh properties", reason, queue_name)
        return _rewrite(msg, b"\x00\x00", reason, queue_name, routing_key)


def _rewrite(msg, properties: bytes, reason: str, queue_name: str, routing_key: str | None):
    props, raw = _decode_with_raw_headers(properties)
    decoded = props.headers or {}
    # x-death routing-keys: the publish key, then CC and BCC as the message still has them
    keys = [msg.routing_key]
    for name in ("CC", "BCC"):
        extra = decoded.get(name)
        if isinstance(extra, list):
            keys += [k for k in extra if isinstance(k, str)]
    headers = dict(raw)
    if routing_key is not None:
        route = [routing_key]
        headers.pop("CC", None)
    else:
        route = keys
    info = {"reason": reason, "queue": queue_name,
            "time": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0),
            "exchange": msg.exchange, "routing-keys": list(keys)}
    if props.expiration is not None:
        info["original-expiration"] = props.expiration
        props.expiration = None
    old = decoded.get("x-death")
    if not isinstance(old, list):
        deaths = [{"count": Long(1), **info}]
    else:
        match, others = None, []
        for d in old:
            if (match is None and isinstance(d, dict) and d.get("queue") == queue_name
                    and d.get("reason") == reason):
                match = d
            else:
                others.append(d)
        if match is None:
            entry = {"count": Long(1), **info}
        else:
            entry = dict(match)
            count = entry.get("count")
            entry["count"] = Long(count + 1 if isinstance(count, int) and not isinstance(count, bool) else 1)
        deaths = [dict(sorted(entry.items())), *(_keep_long_count(d) for d in others)]
    headers["x-death"] = deaths
    if "x-first-death-reason" not in decoded:
        headers["x-first-death-reason"] = reason
        headers["x-first-death-queue"] = queue_name
        headers["x-first-death-exchange"] = msg.exchange
    props.headers = dict(sorted(headers.items()))
    return props.encode(), route, deaths


def with_header(msg, name: str, value):
    """A copy of ``msg`` whose header ``name`` is ``value`` (other headers kept as they were)."""
    return with_headers(msg, {name: value})


def with_headers(msg, changes: dict):
    """A copy of ``msg`` with the headers of ``changes`` set (other headers kept as they were)."""
    from warren.broker.message import Message
    props, raw = _decode_with_raw_headers(msg.properties)
    headers = dict(raw)
    headers.update(changes)
    props.headers = headers
    out = Message(msg.exchange, msg.routing_key, props.encode(), msg.body)
    out.ttl = msg.ttl
    out.persistent = msg.persistent  # a quorum queue stores every message, whatever its delivery mode
    return out


def _keep_long_count(d):
    if isinstance(d, dict) and isinstance(d.get("count"), int) and not isinstance(d["count"], bool):
        return {**d, "count": Long(d["count"])}
    return d


def _is_cycle(queue_name: str, deaths: list) -> bool:
    """RabbitMQ's is_cycle: the message died in ``queue_name`` before, with no rejection since."""
    for d in deaths:
        if not isinstance(d, dict):
            return False  # something a client put there: not a fully automatic cycle
        if d.get("reason") == REJECTED:
            return False
        if d.get("queue") == queue_name:
            return True
    return False


def _decode_with_raw_headers(properties: bytes):
    """A fresh BasicProperties (never the message's cached one) and its headers as
    ``{name: RawValue}`` in wire order, so unchanged entries are written back exactly."""
    return decode_basic_properties(properties), header_entries(properties)
